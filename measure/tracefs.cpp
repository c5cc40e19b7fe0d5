// SPDX-License-Identifier: MIT
#include "measure/tracefs.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <thread>

#include "util/files.hpp"

namespace blkpolicy::measure {

namespace {

constexpr std::string_view kPrefix = "blkpolicy-";

// A tracefs file's whole text (format files, printk_formats: larger than
// one read), or the errno.
struct Text {
    std::string value;
    int err = 0;
};
Text read_text(const std::string& path) {
    Text t;
    util::Fd fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
    if (!fd) {
        t.err = errno;
        return t;
    }
    char buf[16384];
    for (;;) {
        const ssize_t n = ::read(fd.get(), buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            t.err = errno;
            break;
        }
        if (n == 0) break;
        t.value.append(buf, static_cast<std::size_t>(n));
        if (t.value.size() > (16u << 20)) break;  // no tracefs file read here is this large
    }
    return t;
}

int write_text(const std::string& path, std::string_view value) {
    util::Fd fd{::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_TRUNC)};
    if (!fd) return errno;
    ssize_t n;
    do {
        n = ::write(fd.get(), value.data(), value.size());
    } while (n < 0 && errno == EINTR);
    if (n < 0) return errno;
    return static_cast<std::size_t>(n) == value.size() ? 0 : EIO;
}

std::uint64_t leading_number(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    std::uint64_t v = 0;
    std::from_chars(s.data(), s.data() + s.size(), v);
    return v;
}

// "overrun: 12" in a per_cpu stats file.
std::uint64_t stats_value(std::string_view text, std::string_view key) {
    for (std::size_t at = 0; at < text.size();) {
        const auto nl = text.find('\n', at);
        const auto line = text.substr(at, nl == std::string_view::npos ? std::string_view::npos : nl - at);
        if (line.rfind(key, 0) == 0 && line.size() > key.size() && line[key.size()] == ':')
            return leading_number(line.substr(key.size() + 1));
        if (nl == std::string_view::npos) break;
        at = nl + 1;
    }
    return 0;
}

// rmdir of an instance is refused (EBUSY) while a reader still holds one of
// its files: retry briefly.
bool remove_instance(const std::string& path) {
    for (int i = 0; i < 100; ++i) {
        if (::rmdir(path.c_str()) == 0 || errno == ENOENT) return true;
        if (errno != EBUSY) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
}

std::string lockdown_reason() {
    const auto t = read_text("/sys/kernel/security/lockdown");
    if (t.err == 0 && t.value.find("[confidentiality]") != std::string::npos)
        return "the kernel is locked down (confidentiality), which closes tracefs";
    return {};
}

}  // namespace

std::string find_tracefs(const std::string& sysfs_root, std::string* why_not) {
    const std::string root = sysfs_root == "/" ? std::string() : sysfs_root;
    for (const char* rel : {"/kernel/tracing", "/kernel/debug/tracing"}) {
        const std::string dir = root + rel;
        struct stat st {};
        const bool there = ::stat((dir + "/instances").c_str(), &st) == 0 && S_ISDIR(st.st_mode);
        // tracefs is root's alone (mode 0700): another user cannot even look.
        if (there ? ::access((dir + "/instances").c_str(), W_OK) != 0 : errno == EACCES) {
            if (why_not)
                *why_not = "tracefs at " + dir + " is not open to this user (" + util::errno_text(errno) +
                           "): tracing needs root";
            return {};
        }
        if (there) return dir;
    }
    if (why_not) {
        *why_not = lockdown_reason();
        if (why_not->empty())
            *why_not = "tracefs is not mounted at " + root + "/kernel/tracing (mount -t tracefs nodev " + root +
                       "/kernel/tracing)";
    }
    return {};
}

std::optional<std::vector<int>> parse_cpu_list(std::string_view text) {
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
    std::vector<int> out;
    if (text.empty()) return out;
    while (!text.empty()) {
        const auto comma = text.find(',');
        const auto item = text.substr(0, comma);
        text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
        if (comma != std::string_view::npos && text.empty()) return std::nullopt;  // "0," ends in nothing
        int first = 0, last = 0;
        const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), first);
        if (ec != std::errc() || end == item.data() || first < 0) return std::nullopt;
        last = first;
        if (end != item.data() + item.size()) {
            if (*end != '-') return std::nullopt;
            const char* from = end + 1;
            const auto second = std::from_chars(from, item.data() + item.size(), last);
            if (second.ec != std::errc() || second.ptr == from || second.ptr != item.data() + item.size() ||
                last < first)
                return std::nullopt;
        }
        if (last - first > 65536) return std::nullopt;
        for (int c = first; c <= last; ++c) out.push_back(c);
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

std::string instance_name(InstanceOwner owner, unsigned sequence) {
    return std::string(kPrefix) + std::to_string(owner.pid_ns) + "-" + std::to_string(owner.pid) + "-" +
           std::to_string(sequence);
}

std::optional<InstanceOwner> instance_owner(std::string_view name) {
    if (name.rfind(kPrefix, 0) != 0) return std::nullopt;
    name.remove_prefix(kPrefix.size());
    // Three numbers, each ended by '-' but the last.
    std::uint64_t numbers[3] = {};
    for (int i = 0; i < 3; ++i) {
        const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), numbers[i]);
        if (ec != std::errc() || end == name.data()) return std::nullopt;
        name.remove_prefix(static_cast<std::size_t>(end - name.data()));
        if (i < 2) {
            if (name.empty() || name.front() != '-') return std::nullopt;
            name.remove_prefix(1);
        }
    }
    if (!name.empty() || numbers[0] == 0 || numbers[1] == 0 || numbers[1] > 0x7fffffff) return std::nullopt;
    return InstanceOwner{numbers[0], static_cast<long>(numbers[1])};
}

std::uint64_t own_pid_namespace() {
    struct stat st {};
    return ::stat("/proc/self/ns/pid", &st) == 0 ? static_cast<std::uint64_t>(st.st_ino) : 0;
}

namespace {

// Removes the instances of this PID namespace whose process is gone (a
// measure or a daemon killed with SIGKILL). Returns how many it removed.
int remove_stale_instances(const std::string& tracefs) {
    const std::string dir = tracefs + "/instances";
    const std::uint64_t ns = own_pid_namespace();
    std::vector<std::string> names, stale;
    if (ns == 0 || util::list_directory(dir, names) != 0) return 0;
    for (const auto& name : names) {
        const auto owner = instance_owner(name);
        if (!owner || owner->pid_ns != ns || owner->pid == ::getpid()) continue;
        if (::kill(static_cast<pid_t>(owner->pid), 0) != 0 && errno == ESRCH) stale.push_back(name);
    }
    int removed = 0;
    for (const auto& name : stale)
        if (remove_instance(dir + "/" + name)) ++removed;
    return removed;
}

}  // namespace

util::Result<std::unique_ptr<TraceInstance>> TraceInstance::open(const std::string& tracefs,
                                                                 const TraceOptions& options) {
    remove_stale_instances(tracefs);
    static std::atomic<unsigned> sequence{0};
    std::unique_ptr<TraceInstance> t(new TraceInstance());
    t->tracefs_ = tracefs;
    const InstanceOwner self{own_pid_namespace(), static_cast<long>(::getpid())};
    for (int tries = 0; tries < 64 && !t->made_; ++tries) {
        t->name_ = instance_name(self, sequence++);
        t->path_ = tracefs + "/instances/" + t->name_;
        if (::mkdir(t->path_.c_str(), 0700) == 0) {
            t->made_ = true;
        } else if (errno != EEXIST) {
            return util::Status::failure("cannot make a tracing instance " + t->path_ + ": " + util::errno_text(errno));
        }
    }
    if (!t->made_) return util::Status::failure("cannot make a tracing instance under " + tracefs + "/instances");
    // From here on the destructor removes the instance on any failure.
    if (auto st = t->configure(options); !st.ok()) return st;
    return t;
}

util::Status TraceInstance::configure(const TraceOptions& o) {
    const auto fail = [this](const std::string& what, int err) {
        return util::Status::failure("tracing instance " + path_ + ": cannot " + what + ": " + util::errno_text(err));
    };
    if (int e = write_text(path_ + "/tracing_on", "0")) return fail("stop it while it is set up", e);
    // Shrink the buffer first: mkdir allocated the default size on every CPU.
    buffer_kb_ = std::max(4u, o.buffer_kb);
    if (int e = write_text(path_ + "/buffer_size_kb", std::to_string(buffer_kb_)))
        return fail("set buffer_size_kb to " + std::to_string(buffer_kb_), e);
    // A full buffer drops new events (counted as "dropped events") rather
    // than overwriting unread ones: either way the window is lossy, and says so.
    (void)write_text(path_ + "/options/overwrite", "0");
    // One clock for every CPU, so that an issue and its completion on
    // another CPU compare; older kernels keep their per-CPU clock.
    (void)write_text(path_ + "/trace_clock", "mono");
    (void)write_text(path_ + "/buffer_percent", std::to_string(std::clamp(o.watermark_percent, 1u, 100u)));

    const auto header = read_text(tracefs_ + "/events/header_page");
    if (header.err == 0) {
        if (auto f = parse_event_format("name: header_page\nID: 0\n" + header.value)) {
            if (const auto* commit = f->field("commit")) commit_size_ = commit->size;
        }
    }
    const auto sub = read_text(path_ + "/buffer_subbuf_size_kb");
    page_size_ = sub.err == 0 && leading_number(sub.value) > 0 ? leading_number(sub.value) * 1024
                                                               : static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    page_.resize(page_size_);
    const auto printk = read_text(tracefs_ + "/printk_formats");
    if (printk.err == 0) decoder_.set_printk_formats(parse_printk_formats(printk.value));

    // The filters: the devices asked for (a filter is at most a page; past
    // that every device is traced and the others are not reported).
    std::string dev_filter, name_filter, fs_filter;
    const auto either = [](std::string& filter, const std::string& term) {
        filter += (filter.empty() ? "" : " || ") + term;
    };
    for (auto dev : o.devices) {
        either(dev_filter, "dev == " + std::to_string(dev));
        either(name_filter, "name == \"" + devnum_text(dev) + "\"");
        either(fs_filter, "s_dev == " + std::to_string(dev));
    }
    if (!fs_filter.empty())
        for (auto dev : o.partitions) either(fs_filter, "s_dev == " + std::to_string(dev));
    if (dev_filter.size() > 3000 || name_filter.size() > 3000 || fs_filter.size() > 3000)
        dev_filter.clear(), name_filter.clear(), fs_filter.clear();
    // Every device: still only file systems on a block device (major 0 is
    // the anonymous devices' of tmpfs, proc, overlay, btrfs's subvolumes),
    // so that each exec's page faults on those are never traced.
    if (fs_filter.empty()) fs_filter = "s_dev >= " + std::to_string(kernel_dev(1, 0));

    for (const auto& ev : traced_events()) {
        const std::string dir = path_ + "/events/" + ev.system + "/" + ev.name;
        const auto format = read_text(dir + "/format");
        auto parsed = format.err == 0 ? parse_event_format(format.value) : std::nullopt;
        if (!parsed) {
            missing_.push_back(ev.kind);
            continue;
        }
        decoder_.add_format(ev.kind, std::move(*parsed));
        const std::string_view system = ev.system;
        const auto& filter = system == "block" ? dev_filter : system == "filemap" ? fs_filter : name_filter;
        if (!filter.empty()) {
            if (int e = write_text(dir + "/filter", filter)) return fail(std::string("filter ") + ev.name, e);
        }
        if (int e = write_text(dir + "/enable", "1")) return fail(std::string("enable ") + ev.name, e);
    }

    const std::string per_cpu = path_ + "/per_cpu";
    std::vector<std::string> entries;
    if (int e = util::list_directory(per_cpu, entries)) return fail("list " + per_cpu, e);
    std::vector<int> numbers;
    for (const std::string_view name : entries) {
        int n = 0;
        if (name.rfind("cpu", 0) != 0) continue;
        const auto [end, ec] = std::from_chars(name.data() + 3, name.data() + name.size(), n);
        if (ec == std::errc() && end == name.data() + name.size()) numbers.push_back(n);
    }
    std::sort(numbers.begin(), numbers.end());
    for (int n : numbers) {
        const std::string file = per_cpu + "/cpu" + std::to_string(n) + "/trace_pipe_raw";
        util::Fd fd{::open(file.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)};
        if (!fd) {
            if (errno == ENODEV || errno == ENOENT) continue;  // a CPU that is not there
            return fail("open " + file, errno);
        }
        cpus_.push_back({n, std::move(fd)});
    }
    if (cpus_.empty()) return fail("open any per_cpu trace_pipe_raw", ENOENT);
    online_file_ = o.online_cpus_file;
    online_text_ = "\n(not read yet)";
    follow_cpus();
    if (int e = write_text(path_ + "/tracing_on", "1")) return fail("start it", e);
    return {};
}

TraceInstance::~TraceInstance() {
    if (!made_) return;
    (void)write_text(path_ + "/tracing_on", "0");
    cpus_.clear();  // the readers first: rmdir refuses an instance with open files
    remove_instance(path_);
}

std::vector<int> TraceInstance::fds() const {
    std::vector<int> out;
    for (const auto& c : cpus_)
        if (c.polled) out.push_back(c.fd.get());
    return out;
}

bool TraceInstance::follow_cpus() {
    const auto text = read_text(online_file_);
    if (text.err == 0 && text.value == online_text_) return false;
    online_text_ = text.err == 0 ? text.value : std::string();
    // Where the kernel does not say (no such file), every CPU is polled, as
    // before this was known.
    const auto online = text.err == 0 ? parse_cpu_list(text.value) : std::nullopt;
    bool changed = false;
    for (auto& c : cpus_) {
        const bool polled = !online || std::binary_search(online->begin(), online->end(), c.cpu);
        changed |= polled != c.polled;
        c.polled = polled;
    }
    return changed;
}

void TraceInstance::poll_failed(int fd) {
    for (auto& c : cpus_)
        if (c.fd.get() == fd) c.polled = false;
}

void TraceInstance::stop() { (void)write_text(path_ + "/tracing_on", "0"); }

void TraceInstance::set_requests(bool on) {
    // The per-request and per-read events: block's and filemap's (wbt's are few).
    for (const auto& ev : traced_events()) {
        if (std::string_view(ev.system) == "wbt") continue;
        if (std::find(missing_.begin(), missing_.end(), ev.kind) != missing_.end()) continue;
        (void)write_text(path_ + "/events/" + ev.system + "/" + ev.name + "/enable", on ? "1" : "0");
    }
}

void TraceInstance::read_cpu(std::size_t index, std::vector<Event>& out) {
    auto& c = cpus_[index];
    for (;;) {
        const ssize_t n = ::read(c.fd.get(), page_.data(), page_.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;  // EAGAIN: nothing more now
        records_.clear();
        const auto r = parse_page(std::span(page_.data(), static_cast<std::size_t>(n)), commit_size_, records_);
        if (r.missed_events) {
            ++missed_pages_;
            gap_ts_ = std::max(gap_ts_, r.page_ts);
        }
        if (!r.ok) ++bad_pages_;
        for (const auto& rec : records_)
            if (const auto e = decoder_.decode(rec, c.cpu)) out.push_back(*e);
    }
}

// Every CPU is read at once and the CPUs' records (each CPU's already in
// time order) merged by time, so that an issue comes before its completion
// whichever CPUs they ran on; only a pair split across two reads waits in
// the tally.
std::size_t TraceInstance::drain_all(Tally& tally) {
    events_.clear();
    std::vector<std::size_t> starts;
    for (std::size_t i = 0; i < cpus_.size(); ++i) {
        starts.push_back(events_.size());
        read_cpu(i, events_);
    }
    const auto by_time = [](const Event& a, const Event& b) { return a.ts < b.ts; };
    for (std::size_t i = 1; i < starts.size(); ++i)
        std::inplace_merge(
            events_.begin(), events_.begin() + static_cast<std::ptrdiff_t>(starts[i]),
            i + 1 < starts.size() ? events_.begin() + static_cast<std::ptrdiff_t>(starts[i + 1]) : events_.end(),
            by_time);
    if (gap_ts_ != 0) tally.gap(gap_ts_);
    for (const auto& e : events_) tally.add(e);
    if (!events_.empty()) tally.settle(events_.back().ts);
    return events_.size();
}

Loss TraceInstance::loss() const {
    Loss l;
    for (const auto& c : cpus_) {
        const auto t = read_text(path_ + "/per_cpu/cpu" + std::to_string(c.cpu) + "/stats");
        if (t.err) continue;
        l.dropped += stats_value(t.value, "dropped events");
        l.overrun += stats_value(t.value, "overrun") + stats_value(t.value, "commit overrun");
    }
    l.missed_pages = missed_pages_;
    l.bad_pages = bad_pages_;
    return l;
}

std::uint64_t TraceInstance::buffer_total_kb() const {
    const auto t = read_text(path_ + "/buffer_total_size_kb");
    return t.err ? 0 : leading_number(t.value);
}

}  // namespace blkpolicy::measure
