// SPDX-License-Identifier: MIT
// The quirky attributes' hooks, one file each (policy/units/NAME.cpp),
// named in their rows (policy/attributes.cpp).
#pragma once

#include "policy/unit.hpp"

namespace blkpolicy::policy::units {

extern const UnitHooks kNrRequests;      // reset by a scheduler switch
extern const UnitHooks kAsyncDepth;      // 7.0+: capped by nr_requests, refused under none
extern const UnitHooks kIosched;         // a scheduler's tunables: exist only under it
extern const UnitHooks kWbt;             // off under bfq; a retained latency is a no-op
extern const UnitHooks kIoTimeout;       // the same timer as SCSI's device/timeout
extern const UnitHooks kReadAhead;       // recomputed by limits commits; a multipath path's is unused
extern const UnitHooks kBdiMaxRatio;     // not below the bdi's min_ratio
extern const UnitHooks kBdiMinRatio;     // not above the bdi's max_ratio
extern const UnitHooks kBdiStrictLimit;  // 6.2+
extern const UnitHooks kMdStripeCache;   // raid4/5/6 arrays only
extern const UnitHooks kMdSyncSpeed;     // arrays with redundancy only; "N (system)" reads as "system"

}  // namespace blkpolicy::policy::units
