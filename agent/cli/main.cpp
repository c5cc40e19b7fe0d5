// SPDX-License-Identifier: MIT
// blkpolicy: keeps block-queue settings the way a TOML policy says.
#include <exception>
#include <iostream>

#include "agent/cli/commands.hpp"
#include "agent/cli/parse.hpp"

int main(int argc, char** argv) {
    using namespace blkpolicy::agent;
    try {
        auto parsed = parse_command_line(std::vector<std::string>(argv + 1, argv + argc));
        if (parsed.options.help) {
            std::cout << usage_text();
            return kExitOk;
        }
        if (parsed.options.version) {
            std::cout << "blkpolicy " << BLKPOLICY_VERSION << '\n';
            return kExitOk;
        }
        if (!parsed.error.empty()) {
            std::cerr << "blkpolicy: " << parsed.error << "\nTry 'blkpolicy --help'.\n";
            return kExitUsage;
        }
        return run_command(parsed.options, std::cout, std::cerr);
    } catch (const std::exception& e) {
        std::cerr << "blkpolicy: " << e.what() << '\n';
        return kExitRuntime;
    }
}
