/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The kernel interfaces that differ between the kernels this module is
 * built for by DKMS: Debian bookworm's 6.1, and the 6.12 of trixie and
 * bookworm-backports. Kbuild looks for each in the kernel's headers (a
 * feature test, not a version number: it holds for backports too) and
 * defines WB_HAVE_*. Everything else the module uses is the same in both.
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

#endif /* DM_WBKIT_COMPAT_H */
