// SPDX-License-Identifier: MIT
#include "udev/sysfs_text.hpp"

#include "policy/unit.hpp"
#include "util/text.hpp"

namespace blkpolicy::udev {

SchedulerLine parse_scheduler_line(std::string_view line) {
    SchedulerLine out;
    std::string text = util::trim(line);
    std::size_t i = 0;
    while (i < text.size()) {
        while (i < text.size() && text[i] == ' ') ++i;
        std::size_t j = i;
        while (j < text.size() && text[j] != ' ') ++j;
        if (j > i) {
            std::string word = text.substr(i, j - i);
            if (word.size() >= 2 && word.front() == '[' && word.back() == ']') {
                word = word.substr(1, word.size() - 2);
                out.active = word;
            }
            out.offered.push_back(word);
        }
        i = j;
    }
    return out;
}

std::string normalise_readback(const policy::AttributeSpec* spec, std::string_view raw) {
    if (spec && spec->id == policy::Key::scheduler) return parse_scheduler_line(raw).active;
    if (spec && spec->hooks && spec->hooks->read) return spec->hooks->read(util::trim(raw));
    return util::trim(raw);
}

std::string normalise_readback(std::string_view attribute, std::string_view raw) {
    return normalise_readback(policy::fixed_attribute(attribute), raw);
}

}  // namespace blkpolicy::udev
