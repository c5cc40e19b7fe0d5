// SPDX-License-Identifier: MIT
// What blkpolicy changed, remembered, and put back: each value's original
// (what the device had before blkpolicy first wrote it) is kept in the
// state directory with what blkpolicy wrote; a value the policy no longer
// declares, or every value at `blkpolicy restore`, is written back to its
// original unless someone else moved it since.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "agent/executor.hpp"
#include "agent/state.hpp"
#include "policy/plan.hpp"
#include "systemd/alerts.hpp"
#include "udev/sysfs.hpp"

namespace blkpolicy::agent {

// Notes the values a pass changed: the first original of each (the value
// the plan found) is kept, what was written is updated. True when `values`
// changed (and should be saved).
bool note_writes(WrittenValues& values, const policy::DevicePlan& plan, const DeviceResult& result);

// The attributes a plan declares for its device (every action but skip).
std::set<std::string> declared_attributes(const policy::DevicePlan& plan);

struct Restored {
    enum class Result {
        restored,  // written back to the original and read back so
        already,   // it read as the original already
        left,      // someone else moved it since blkpolicy wrote it: left as it is
        failed,    // the write back failed or did not stick
        busy,      // another writer held the queue: tried again at the next pass (kept)
        dropped,   // nothing to put back: the device has no such attribute now, or a scheduler switch put it back
    };
    std::string attribute;
    std::string original;  // what is put back
    std::string written;   // what blkpolicy had written
    std::string before;    // what it read before
    std::string after;     // what it read after
    Result result = Result::restored;
    std::string detail;
};
const char* to_string(Restored::Result r);

// Puts back every value in `values` whose attribute is not in `keep`, in
// write order, through the executor (its read-back and EBUSY retries), and
// takes each out of `values` (except those still busy). A scheduler put
// back takes its tunables with it.
std::vector<Restored> restore_values(udev::Sysfs& sysfs, const std::string& device, WrittenValues& values,
                                     const std::set<std::string>& keep, const BusyRetry& retry = default_busy_retry());

// One sentence for the journal and the command's table: "put read_ahead_kb
// of vda back to 8192 (blkpolicy had set 128)", "left ...: it is now 256,
// not the 128 blkpolicy wrote: someone else set it since".
std::string restored_sentence(const std::string& device, const Restored& r);

// Its `restored` journal entry (the sentence, then `why` when it was put
// back); the daemon and `blkpolicy restore` send the same fields.
systemd::Alert restored_alert(const std::string& device, const Restored& r, const std::string& why);

}  // namespace blkpolicy::agent
