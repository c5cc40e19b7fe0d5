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
