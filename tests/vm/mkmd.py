#!/usr/bin/python3
"""Writes an MD RAID superblock into an image file, as mdadm would lay it
out (the host has no md driver, so mdadm --create cannot run here)."""
import os, struct, sys, uuid

MAGIC = 0xa92b4efc

def md090(path):
    size = os.path.getsize(path)
    off = (size & ~(65536 - 1)) - 65536
    sb = bytearray(4096)
    u = uuid.uuid4().bytes
    # magic, major, minor, patch, gvalid_words, set_uuid0, ctime, level, size,
    # nr_disks, raid_disks, md_minor, not_persistent, set_uuid1..3
    struct.pack_into('<IIIIIIIiIIIIIIII', sb, 0, MAGIC, 0, 90, 0, 0,
                     struct.unpack('<I', u[0:4])[0], 0, 1, (off // 1024), 2, 2, 0, 0,
                     *struct.unpack('<III', u[4:16]))
    # checksum over the 4 KiB (field at word 38)
    s = sum(struct.unpack('<1024I', bytes(sb))) & 0xffffffff
    struct.pack_into('<I', sb, 38 * 4, s)
    return off, sb

def md1(path, minor):
    size = os.path.getsize(path)
    if minor == 0:
        off = ((size // 512 - 16) & ~7) * 512
    elif minor == 1:
        off = 0
    else:
        off = 4096
    max_dev = 2
    sb = bytearray(256 + 2 * max_dev)
    struct.pack_into('<III', sb, 0, MAGIC, 1, 0)
    sb[16:32] = uuid.uuid4().bytes
    sb[32:41] = b'wbkit:md1'
    struct.pack_into('<IIQII', sb, 72, 1, 0, (size // 512 - 4096) & ~7, 0, 2)
    data_offset = 0 if minor == 0 else 2048
    struct.pack_into('<QQQ', sb, 128, data_offset, size // 512 - 4096, off // 512)
    struct.pack_into('<I', sb, 160, 0)
    sb[168:184] = uuid.uuid4().bytes
    struct.pack_into('<QQQ', sb, 192, 0, 1, 0xffffffffffffffff)
    struct.pack_into('<I', sb, 220, max_dev)
    struct.pack_into('<HH', sb, 256, 0, 1)
    csum = sum(struct.unpack('<%dI' % (len(sb) // 4), bytes(sb)))
    csum = (csum & 0xffffffff) + (csum >> 32)
    struct.pack_into('<I', sb, 216, csum & 0xffffffff)
    return off, sb

path, version = sys.argv[1], sys.argv[2]
off, sb = md090(path) if version == '0.90' else md1(path, int(version.split('.')[1]))
with open(path, 'r+b') as f:
    f.seek(off)
    f.write(sb)
