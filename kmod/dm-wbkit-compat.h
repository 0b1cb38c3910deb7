/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The kernel interfaces that differ between the kernels this module is
 * built for and tested on (make test-kernels, kmod/README.md's table):
 * Debian bookworm's 6.1, bookworm-backports' 6.12, trixie-backports' 7.3
 * and sid's 7.2. Kbuild looks for each in the kernel's headers (a feature
 * test, not a version number: it holds for backports too) and defines
 * WB_HAVE_*. Everything else the module uses is the same in all of them
 * (7.x's new dm_io() argument does not touch it: it does not call dm_io();
 * crc32c() keeps its header when it moves from libcrc32c into lib/crc).
 */
#ifndef DM_WBKIT_COMPAT_H
#define DM_WBKIT_COMPAT_H

/* 6.12 moved the unaligned accessors out of asm/. */
#ifdef WB_HAVE_LINUX_UNALIGNED_H
#include <linux/unaligned.h>
#else
#include <asm/unaligned.h>
#endif

/* 6.5 gave block device opens their own mode type, blk_mode_t. */
#ifdef WB_HAVE_BLK_OPEN_WRITE
#define WB_TABLE_MODE_WRITE BLK_OPEN_WRITE
#else
#define WB_TABLE_MODE_WRITE FMODE_WRITE
#endif

/*
 * The CRC-32C of len zero bytes appended to a CRC: 6.15 renamed it, and a
 * kernel may drop it. Without it an append checksums its whole segment
 * again instead of its new blocks (wb_append_checksum).
 */
#if defined(WB_HAVE_CRC32C_SHIFT)
#include <linux/crc32.h>
#define wb_crc32c_shift(crc, len) crc32c_shift(crc, len)
#elif defined(WB_HAVE_CRC32C_LE_SHIFT)
#include <linux/crc32.h>
#define wb_crc32c_shift(crc, len) __crc32c_le_shift(crc, len)
#endif

#endif /* DM_WBKIT_COMPAT_H */
