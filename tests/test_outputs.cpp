// agent/daemon/outputs: what the daemon publishes after a pass.
#include <doctest/doctest.h>

#include "agent/daemon/outputs.hpp"
#include "support/reconciler_world.hpp"

using namespace blkpolicy;
using agent::Trigger;
using test::loops_policy;
using test::World;

TEST_CASE("metrics text after a pass") {
    World w;
    w.rec.set_policy(loops_policy("read_ahead_kb = 128\n"));
    w.rec.reconcile("loop0", Trigger::added);
    w.poke("read_ahead_kb", "512");
    w.rec.reconcile("loop0", Trigger::verify);
    const auto text = agent::metrics_text(w.rec, 1700000000.0);
    CHECK(text.find("blkpolicy_devices_managed 1\n") != std::string::npos);
    CHECK(text.find("blkpolicy_last_verify_timestamp_seconds 1700000000\n") != std::string::npos);
    CHECK(text.find("blkpolicy_attribute_in_policy{device=\"loop0\",attribute=\"read_ahead_kb\"} 1\n") !=
          std::string::npos);
    CHECK(text.find("blkpolicy_drifts_total{device=\"loop0\",attribute=\"read_ahead_kb\"} 1\n") != std::string::npos);
    CHECK(text.find("# TYPE blkpolicy_failures_total counter\n") != std::string::npos);
}
