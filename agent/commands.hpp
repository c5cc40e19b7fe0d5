// The commands behind the CLI. Each returns the process exit code.
#pragma once

#include <ostream>

#include "agent/cli.hpp"

namespace blkpolicy::agent {

int run_command(const Options& options, std::ostream& out, std::ostream& err);

}  // namespace blkpolicy::agent
