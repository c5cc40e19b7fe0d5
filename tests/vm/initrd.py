# SPDX-License-Identifier: MIT
"""An initramfs with files of the test's own laid over it, made on the host.

The kernel unpacks every cpio archive of an initramfs in turn, compressed
or not, and a later file of the same name replaces an earlier one
(init/initramfs.c). So a test that wants the initramfs a guest made with
one file changed (a broken policy, a wrapper in place of a binary) appends
an uncompressed "newc" archive holding those files to a copy of it, in
milliseconds on the host, where making it again in the guest costs a
minute or more of both CPUs under TCG.
"""

import stat
import subprocess


def _newc_entry(name, mode, data, ino):
    name_bytes = name.encode() + b"\0"
    fields = (ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name_bytes), 0)
    out = b"070701" + "".join(f"{x:08x}" for x in fields).encode() + name_bytes
    out += b"\0" * (-len(out) % 4)  # header and name end on four bytes
    out += data + b"\0" * (-len(data) % 4)
    return out


def newc(files):
    """An uncompressed newc archive of FILES ({path: (mode, bytes)}, paths
    relative to the initramfs root), its directories before them. A mode
    without a file type is a regular file's; stat.S_IFLNK | 0o777 makes a
    symbolic link to the bytes."""
    dirs = sorted({"/".join(p.split("/")[:i]) for p in files for i in range(1, p.count("/") + 1)})
    out, ino = b"", 0x626c6b00  # inode numbers of its own ("blk\0"...)
    for d in dirs:
        ino += 1
        out += _newc_entry(d, stat.S_IFDIR | 0o755, b"", ino)
    for path, (mode, data) in sorted(files.items()):
        ino += 1
        out += _newc_entry(path, mode if stat.S_IFMT(mode) else stat.S_IFREG | mode, data, ino)
    out += _newc_entry("TRAILER!!!", 0, b"", 0)
    return out + b"\0" * (-len(out) % 512)


def overlaid(base, out, files):
    """Writes OUT: the initramfs BASE with FILES ({path: (mode, bytes or
    str)}) laid over it."""
    with open(base, "rb") as f:
        data = f.read()
    data += b"\0" * (-len(data) % 4)  # the kernel looks for the next archive on four bytes
    encoded = {p.lstrip("/"): (mode, body.encode() if isinstance(body, str) else body)
               for p, (mode, body) in files.items()}
    with open(out, "wb") as f:
        f.write(data + newc(encoded))
    return out


# The compressors an initramfs's archives come in (initramfs-tools and
# dracut choose one of these), by their first bytes, and the tool that
# reads each on the host.
_COMPRESSED = ((b"\x1f\x8b", "gzip"), (b"\x28\xb5\x2f\xfd", "zstd"), (b"\xfd7zXZ\x00", "xz"),
               (b"\x02\x21\x4c\x18", "lz4"), (b"BZh", "bzip2"), (b"\x5d\x00\x00", "lzma"))


def _decompressed(data, tool):
    """DATA (one compressed stream, maybe with padding after it) as it
    decompresses, through the host's TOOL."""
    args = {"gzip": ["gzip", "-dc"], "zstd": ["zstd", "-dcq"], "xz": ["xz", "-dc"], "lz4": ["lz4", "-dc"],
            "bzip2": ["bzip2", "-dc"], "lzma": ["xz", "--format=lzma", "-dc"]}[tool]
    out = subprocess.run(args, input=data.rstrip(b"\0"), capture_output=True)
    if not out.stdout:
        raise ValueError(f"{tool} read nothing from the initramfs: {out.stderr.decode(errors='replace').strip()}")
    return out.stdout


def _archives(data, out):
    """Reads every newc archive in DATA (uncompressed ones, and a compressed
    rest, the way the kernel's init/initramfs.c does) into OUT."""
    pos = 0
    while pos < len(data):
        if data[pos] == 0:  # padding between archives
            pos += 1
            continue
        if data.startswith(b"07070", pos):
            while True:
                head = data[pos:pos + 110]
                if len(head) < 110 or not head.startswith(b"07070"):
                    raise ValueError(f"not a newc header at byte {pos}")
                mode, size, namesize = (int(head[6 + 8 * i:14 + 8 * i], 16) for i in (1, 6, 11))
                name = data[pos + 110:pos + 110 + namesize - 1].decode(errors="replace")
                body = pos + 110 + namesize
                body += -body % 4
                if name == "TRAILER!!!":
                    pos = body
                    break
                out[name.removeprefix("./") or "."] = (mode, data[body:body + size])
                pos = body + size + (-size % 4)
            continue
        tool = next((t for magic, t in _COMPRESSED if data.startswith(magic, pos)), None)
        if tool is None:
            raise ValueError(f"neither an archive nor a known compressor at byte {pos}: {data[pos:pos + 8]!r}")
        _archives(_decompressed(data[pos:], tool), out)  # the compressed part is the last
        return


def members(path):
    """{path inside: (mode, bytes)} of the initramfs at PATH, read on the
    host (a later file of a name replaces an earlier one, as the kernel
    unpacks them): what lsinitramfs and lsinitrd list, without their minute
    of a TCG guest's CPU."""
    with open(path, "rb") as f:
        data = f.read()
    out = {}
    _archives(data, out)
    return out
