// SPDX-License-Identifier: MIT
// The daemon's decisions for one device at a time: look, compare with the
// policy, re-apply in enforce mode, and alert once per change of state.
// Owns no loop and no clock; the daemon (agent/daemon) feeds it triggers.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "agent/daemon/verdict.hpp"
#include "agent/executor.hpp"
#include "agent/restore.hpp"
#include "agent/state.hpp"
#include "kernel/rows.hpp"
#include "policy/plan.hpp"
#include "policy/policy.hpp"
#include "systemd/alerts.hpp"
#include "udev/sysfs.hpp"
#include "writers/model.hpp"

namespace blkpolicy::agent {

enum class Trigger {
    verify,          // the timer, a rescan, a reload, or a related device's event
    udev_processed,  // udevd finished its rules for the device
    changed,         // kernel change uevent
    added,           // kernel add uevent, or first sight
};
const char* to_string(Trigger t);

struct AttrRecord {
    std::string expected;
    std::string actual;    // as last read
    std::string original;  // what the device had before blkpolicy first wrote it
    std::string rule;      // "name (file:line)"
    AttrStatus status = AttrStatus::ok;
    unsigned long drifts = 0;    // drift, reverted and conflict alerts so far
    unsigned long failures = 0;  // failed alerts so far
};

// Who the device is, for the metrics' blkpolicy_device_info (labels that
// join node_exporter's node_disk_info on `device`). Read at first sight and
// on add and change uevents, not on every pass.
struct DeviceLabels {
    bool known = false;
    std::string driver, model, vendor, serial, stack;
    bool rotational = false;  // as the device claimed it before blkpolicy wrote anything (frozen)
};

struct DeviceRecord {
    std::string identity;
    DeviceLabels labels;
    // Why its facts could not be recorded (a full /run), said once; empty
    // when they were.
    std::string record_error;
    std::map<std::string, AttrRecord> attrs;
    // Verify passes since the device's add uevent. Drivers finish their
    // setup after the add uevent (sd revalidates, NVMe scans its
    // namespaces) and may put back a value blkpolicy just wrote: through the
    // first kSettlePasses verify passes such a revert is part of applying
    // the policy (re-applied, reported as applied), not a warning. A device
    // first seen on a pass (present at start) is settled from the start.
    int verifies_since_add = 0;
    // What blkpolicy changed on this device instance and what it had
    // before (the state directory's record, read at first sight): put back
    // when the policy stops declaring it.
    WrittenValues written;
    bool written_loaded = false;
    std::string written_error;  // why the record could not be saved, said once
};
inline constexpr int kSettlePasses = 2;

struct Summary {
    std::size_t devices = 0;  // with at least one managed attribute
    std::size_t drifted = 0;  // attributes out of policy now (observe mode)
    std::size_t failed = 0;   // attributes that could not be applied
    std::size_t busy = 0;     // attributes another writer kept from being written at the last pass
};

// A save tried at every pass (daemon.json, the metrics file, a device's
// facts) that fails is said once, as a warning with `going_on` after the
// reason, and its end once more, as "`recovered`REASON)"; `last` keeps the
// failure being said (empty while saves work).
void say_save_once(systemd::EventLog& log, const util::Status& st, std::string& last, const std::string& going_on,
                   const std::string& recovered);

class Reconciler {
public:
    // HOST: read once (udev::read_host_context) by whoever runs the passes.
    Reconciler(udev::Sysfs& sysfs, const StateDir& state, systemd::EventLog& log, const policy::HostContext& host);

    void set_policy(policy::Policy policy) { policy_ = std::move(policy); }
    const policy::Policy& policy() const { return policy_; }
    void set_mode(policy::Mode mode) { mode_ = mode; }
    policy::Mode mode() const { return mode_; }
    void set_writers(std::vector<writers::WriterAssignment> writers) {
        writers_ = std::move(writers);
        writer_reads_ = writers::reads_of(writers_);
    }
    void set_udev_db(std::string dir) { udev_db_ = std::move(dir); }
    // Schedulers the kernel refused are not tried again until this (a
    // reload: the admin may have installed the module meanwhile).
    void forget_refused_schedulers() { context_.refused_schedulers.clear(); }
    // The host read again (the daemon's reload); what it refused stays.
    void set_host(const policy::HostContext& host) { static_cast<policy::HostContext&>(context_) = host; }
    const policy::HostContext& host() const { return context_; }
    // How long a write refused with EBUSY is tried again within one pass.
    void set_busy_retry(BusyRetry retry) { retry_ = std::move(retry); }
    // Read who each device is (DeviceLabels) at first sight and on add and
    // change uevents: the metrics need it, a daemon without them does not.
    void set_identity_labels(bool on) { identity_labels_ = on; }

    // Looks at one device and acts on what it finds. Returns false when the
    // device is gone (and has been forgotten).
    bool reconcile(const std::string& device, Trigger trigger);
    void forget(const std::string& device);

    const std::map<std::string, DeviceRecord>& devices() const { return devices_; }
    Summary summary() const;

private:
    systemd::AlertKind classify(const policy::DeviceFacts& facts, const policy::Action& a, const AttrRecord& r,
                                const policy::Values& values, Trigger trigger, writers::FoundWriter& writer) const;
    // Says what a verdict says of one attribute: an alert, an info line or nothing.
    void say(Say what_to_say, const AttrPass& p, const std::string& device, const policy::Action& a,
             const AttrRecord& r, const std::string& before, const std::string& after, const AttributeResult* res,
             const writers::FoundWriter& writer);
    // Puts back the values the policy no longer declares (on_removal =
    // "restore"), one restored entry each. True when it wrote something.
    bool put_back(const std::string& device, const policy::DeviceFacts& facts, DeviceRecord& rec,
                  const std::set<std::string>& declared);
    // Saves rec.written in the state directory; a failure is said once.
    void save_written(const std::string& device, const policy::DeviceFacts& facts, DeviceRecord& rec);
    void alert(systemd::AlertKind kind, const std::string& device, const policy::Action& a, const AttrRecord& r,
               const std::string& actual, const std::string& message, const writers::FoundWriter& writer = {});

    udev::Sysfs& sysfs_;
    const StateDir& state_;
    systemd::EventLog& log_;
    policy::PlanContext context_;  // the host, and what this boot's kernel refused
    BusyRetry retry_ = default_busy_retry();
    bool identity_labels_ = false;
    policy::Policy policy_;
    policy::Mode mode_ = policy::Mode::enforce;
    std::vector<writers::WriterAssignment> writers_;  // udev rules and the other writers
    writers::UdevReads writer_reads_;                 // what their conditions read of a device
    std::string udev_db_;
    std::map<std::string, DeviceRecord> devices_;
};

}  // namespace blkpolicy::agent
