// SPDX-License-Identifier: GPL-2.0
/*
 * dm-wbkit-format.c - formatting a cache device, the superblock record,
 * the clean-copy trust record, and the format guard: what a cache device
 * holds before it is used (wb_check_cache_signature).
 *
 * The format is docs/FORMAT.md; the structures are format/wbkit_format.h.
 */
#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>
#include <linux/sizes.h>
#include <linux/string.h>

#include "dm-wbkit.h"

#define DM_MSG_PREFIX "writeboost"

/* ---------------------------------------------------------------------- */
/* Format */

/* The trust record's 4 KiB block (zeroed) for trusted_from_id. */
static void wb_fill_trust(struct wb_device *wb, void *blk, u64 trusted_from_id)
{
	struct wb_clean_trust_device *rec = blk;

	rec->magic = cpu_to_le32(WB_TRUST_MAGIC);
	rec->trusted_from_id = cpu_to_le64(trusted_from_id);
	rec->nr_segments = cpu_to_le64(wb->nr_segments);
}

/*
 * docs/FORMAT.md's order: zero the superblock region, zero the first 4 KiB of
 * every slot, flush, then write the magic with FUA. A crash before the magic
 * is durable leaves an unformatted cache that is formatted again; a cache
 * with a valid magic never holds stale headers of an older format.
 */
int wb_format(struct wb_device *wb, char **error)
{
	struct wb_superblock_header_device *sb;
	void *zero = (void *)get_zeroed_page(GFP_KERNEL);
	void *trust_blk = (void *)get_zeroed_page(GFP_KERNEL);
	struct wb_aio aio;
	sector_t s;
	u64 k;
	int err;

	if (!zero || !trust_blk) {
		free_page((unsigned long)zero);
		free_page((unsigned long)trust_blk);
		*error = "Cannot allocate memory to format the cache device";
		return -ENOMEM;
	}
	/*
	 * Every entry written from now on is trusted (wb_clean_copy_trusted).
	 * Written with the zeroing, not after it: an unflushed write of the
	 * same block may still land after a later one.
	 */
	wb_fill_trust(wb, trust_blk, 1);
	DMINFO("formatting the cache device (%llu segments)",
	       (unsigned long long)wb->nr_segments);

	do {
		wb_aio_init(&aio);
		for (s = 0; s < WB_SUPERBLOCK_SECTORS; s += WB_BLOCK_SECTORS)
			wb_aio_submit(wb, &aio, WB_DEV_CACHE, REQ_OP_WRITE, s,
				      s == WB_TRUST_SECTOR ? trust_blk : zero,
				      WB_BLOCK_SIZE);
		for (k = 0; k < wb->nr_segments; k++) {
			wb_aio_submit(wb, &aio, WB_DEV_CACHE, REQ_OP_WRITE,
				      wb_slot_start_sector(k), zero,
				      WB_BLOCK_SIZE);
			cond_resched();
		}
		err = wb_aio_wait(&aio);
		/* Zeroing again is harmless. */
	} while (wb_retry_transient(wb, err));
	if (err) {
		wb_set_dead(wb, WB_DEV_CACHE, WB_OP_WRITE, aio.err_sector, err);
		goto io_error;
	}

	wb->trusted_from_id = 1;
	wb->trust_nr_segments = wb->nr_segments;

	/* The zeroed headers are durable before the magic makes them valid. */
	err = wb_flush_dev(wb, WB_DEV_CACHE);
	if (err)
		goto io_error;

	sb = zero;
	sb->magic = cpu_to_le32(WB_MAGIC);
	err = wb_sync_io(wb, WB_DEV_CACHE, REQ_OP_WRITE | REQ_FUA, 0, zero,
			 WB_BLOCK_SIZE);
	if (err)
		goto io_error;
	/* The flush above made the zeroed headers durable. */
	for (k = 0; k < wb->nr_segments; k++)
		wb->segs[k].header_zeroed = true;
	free_page((unsigned long)zero);
	free_page((unsigned long)trust_blk);
	return 0;

io_error:
	*error = "I/O error while formatting the cache device";
	free_page((unsigned long)zero);
	free_page((unsigned long)trust_blk);
	return err;
}

/*
 * Writes last_writeback_segment_id to the superblock record, with FUA. The
 * record is the 4 KiB block 2040..2047 with the id at the start of its last
 * sector (byte 0xFFE00); the rest of the block is zero, as formatting left
 * it.
 */
void wb_write_sb_record(struct wb_device *wb, void *blk, u64 id)
{
	struct wb_superblock_record_device *rec =
		blk + WB_BLOCK_SIZE - WB_SECTOR_SIZE;

	memset(blk, 0, WB_BLOCK_SIZE);
	rec->last_writeback_segment_id = cpu_to_le64(id);
	wb_sync_io(wb, WB_DEV_CACHE, REQ_OP_WRITE | REQ_FUA,
		   WB_SB_RECORD_SECTOR + 1 - WB_BLOCK_SECTORS, blk,
		   WB_BLOCK_SIZE);
}

/*
 * Writes the clean-copy trust record (format header), with FUA: its own
 * 4 KiB block, the rest zero.
 */
int wb_write_trust(struct wb_device *wb, u64 trusted_from_id)
{
	void *blk = (void *)get_zeroed_page(GFP_KERNEL);
	int err;

	if (!blk)
		return -ENOMEM;
	wb_fill_trust(wb, blk, trusted_from_id);
	err = wb_sync_io(wb, WB_DEV_CACHE, REQ_OP_WRITE | REQ_FUA,
			 WB_TRUST_SECTOR, blk, WB_BLOCK_SIZE);
	free_page((unsigned long)blk);
	if (!err) {
		wb->trusted_from_id = trusted_from_id;
		wb->trust_nr_segments = wb->nr_segments;
	}
	return err;
}

/* ---------------------------------------------------------------------- */
/* What the cache device holds before it is used */

/*
 * The format rule (kmod/README.md, "Which cache devices are used"): a
 * device is blank, and formatted as a new cache, only when its first and
 * its last MiB are all zeros. File systems, RAID members, partition tables
 * and other caches keep their labels in one of the two (ext2/3/4 at byte
 * 1024, MD 1.2 at 4096, JFS and ISO 9660 at 32 KiB, btrfs and ReiserFS at
 * 64 KiB, MD 0.90 and 1.0 near the end): the decision does not depend on
 * knowing them. The list below only names what was found, for the message.
 */
#define WB_BLANK_BYTES		SZ_1M
#define WB_BLANK_SECTORS	(WB_BLANK_BYTES >> WB_SECTOR_SHIFT)
#define WB_MD_MAGIC		0xa92b4efcU

/* Names a well-known signature in the first MiB (head), or NULL. */
static const char *wb_head_signature(const u8 *head)
{
	static const u8 luks[6] = { 'L', 'U', 'K', 'S', 0xba, 0xbe };
	static const u8 bcache[16] = { 0xc6, 0x85, 0x73, 0xf6, 0x4e, 0x1a,
				       0x45, 0xca, 0x82, 0x65, 0xf5, 0x7f,
				       0x48, 0xba, 0x6d, 0x81 };
	unsigned int s;

	if (!memcmp(head, "XFSB", 4))
		return "an XFS file system";
	if (!memcmp(head, luks, sizeof(luks)))
		return "a LUKS header";
	if (get_unaligned_le32(head) == 0x23489321)
		return "a dm-writecache superblock";
	if (get_unaligned_le32(head) == WB_MD_MAGIC)
		return "an MD RAID superblock (1.1)";
	if (get_unaligned_le32(head + 4096) == WB_MD_MAGIC)
		return "an MD RAID superblock (1.2)";
	for (s = 0; s < 4; s++)
		if (!memcmp(head + s * WB_SECTOR_SIZE, "LABELONE", 8))
			return "an LVM2 physical volume label";
	if (!memcmp(head + 4096 + 24, bcache, sizeof(bcache)))
		return "a bcache superblock";
	if (get_unaligned_le16(head + 1080) == 0xef53)
		return "an ext2/3/4 file system";
	if (get_unaligned_le32(head + 1024) == 0xf2f52010)
		return "an f2fs file system";
	if (get_unaligned_le16(head + 1024 + 6) == 0x3434)
		return "a nilfs2 file system";
	if (!memcmp(head + 65536 + 64, "_BHRfS_M", 8))
		return "a btrfs file system";
	if (!memcmp(head + 65536 + 52, "ReIsEr", 6) ||
	    !memcmp(head + 8192 + 52, "ReIsEr", 6))
		return "a ReiserFS file system";
	if (!memcmp(head + 32768, "JFS1", 4))
		return "a JFS file system";
	if (!memcmp(head + 32768 + 1, "CD001", 5))
		return "an ISO 9660 file system";
	if (!memcmp(head + 4086, "SWAPSPACE2", 10) ||
	    !memcmp(head + 4086, "SWAP-SPACE", 10))
		return "a swap area";
	if (get_unaligned_le64(head + 32) == 6142003)
		return "dm-cache metadata";
	if (get_unaligned_le64(head + 32) == 27022010)
		return "dm-thin metadata";
	if (!memcmp(head + 512, "EFI PART", 8))
		return "a GPT partition table";
	if (head[510] == 0x55 && head[511] == 0xaa)
		return "a DOS partition table or boot sector";
	return NULL;
}

/*
 * Names a signature kept at the end of a device of size sectors, in its
 * last MiB (tail, from sector tail_start), or NULL: the MD RAID 0.90 and
 * 1.0 superblocks.
 */
static const char *wb_tail_signature(const u8 *tail, sector_t tail_start,
				     sector_t size)
{
	sector_t md090 = round_down(size, 128) - 128;	/* 64 KiB aligned */
	sector_t md10 = round_down(size - 16, 8);	/* 8 KiB from the end */

	if (md090 >= tail_start &&
	    get_unaligned_le32(tail + ((md090 - tail_start) << WB_SECTOR_SHIFT)) ==
	    WB_MD_MAGIC)
		return "an MD RAID superblock (0.90)";
	if (md10 >= tail_start &&
	    get_unaligned_le32(tail + ((md10 - tail_start) << WB_SECTOR_SHIFT)) ==
	    WB_MD_MAGIC)
		return "an MD RAID superblock (1.0)";
	return NULL;
}

/*
 * A cache this target used, whose first 4 KiB were zeroed to have it
 * formatted again: Debian's writeboost script does exactly that when it
 * stops a mapping (`writeboost -u`: dd of=<cache> bs=4096 count=1), and a
 * format that crashed before its magic leaves the same. The trust record
 * (sector 8, written by dm-wbkit only, docs/FORMAT.md) must be intact and
 * the rest of the superblock region, up to the record sector, zero: then
 * the device was this target's cache, and formatting it is what was asked.
 */
static bool wb_wiped_cache_start(const u8 *head)
{
	const u8 *trust = head + (WB_TRUST_SECTOR << WB_SECTOR_SHIFT);
	const u8 *rest = trust + WB_BLOCK_SIZE;

	return !memchr_inv(head, 0, WB_TRUST_SECTOR << WB_SECTOR_SHIFT) &&
	       get_unaligned_le32(trust + WB_TRUST_MAGIC_OFFSET) == WB_TRUST_MAGIC &&
	       !memchr_inv(trust + 4, 0, WB_TRUST_FROM_OFFSET - 4) &&
	       !memchr_inv(trust + sizeof(struct wb_clean_trust_device), 0,
			   WB_BLOCK_SIZE - sizeof(struct wb_clean_trust_device)) &&
	       !memchr_inv(rest, 0, WB_SB_RECORD_OFFSET -
			   (rest - head));
}

/*
 * A read of the cache device to decide what it holds: an error fails this
 * construction or resume and changes nothing, so it is counted and does
 * not kill the target (transient errors are retried underneath).
 */
static int wb_check_read(struct wb_device *wb, sector_t sector, void *buf,
			 unsigned int len)
{
	int err = wb_sync_io_nofail(wb, WB_DEV_CACHE, REQ_OP_READ, sector, buf,
				    len);

	if (err && !wb_dead(wb)) {
		wb_count_error(wb, WB_DEV_CACHE, WB_OP_READ);
		DMERR_LIMIT("cache device read error %d at sector %llu while checking what it holds: nothing was written, a later attempt reads again",
			    err, (unsigned long long)sector);
	}
	return err;
}

/* Reads len bytes (a multiple of 512) from sector in bounded pieces. */
static int wb_check_read_range(struct wb_device *wb, sector_t sector, u8 *buf,
			       unsigned int len)
{
	while (len) {
		unsigned int n = min_t(unsigned int, len, SZ_256K);
		int err = wb_check_read(wb, sector, buf, n);

		if (err)
			return err;
		sector += n >> WB_SECTOR_SHIFT;
		buf += n;
		len -= n;
	}
	return 0;
}

/*
 * Decides whether the cache device may be used: the writeboost magic in a
 * valid superblock (a cache, replayed), or zeros in its first and last MiB
 * (a request for a fresh cache, formatted; *blank is set), or a cache of
 * this target whose start was wiped (wb_wiped_cache_start, formatted).
 * Anything else is refused with -EINVAL and a log line naming the device
 * and what it holds: a mistyped device path must never be formatted.
 * Reads only (into the scratch space: construction and the first resume
 * run before the threads that use it). On failure *error says why.
 */
int wb_check_cache_signature(struct wb_device *wb, bool *blank, char **error)
{
	struct block_device *bdev = wb->cache_dev->bdev;
	sector_t size = bdev_nr_sectors(bdev);
	sector_t tail_start;
	u8 *head = wb_scratch(wb);
	u8 *tail = head + WB_BLANK_BYTES;
	const u8 *nz;
	const char *what;
	u64 at;
	u32 magic;
	int err;

	BUILD_BUG_ON(WB_SCRATCH_SIZE < 2 * WB_BLANK_BYTES);
	*blank = false;
	if (size < WB_BLANK_SECTORS) {
		*error = "The cache device is smaller than 1 MiB";
		return -EINVAL;
	}
	tail_start = size - WB_BLANK_SECTORS;

	err = wb_check_read(wb, 0, head, WB_BLOCK_SIZE);
	if (err) {
		*error = "Cannot read the superblock of the cache device";
		return err;
	}
	magic = get_unaligned_le32(head);
	if (magic == WB_MAGIC) {
		if (wb_superblock_valid(head))
			return 0;
		nz = memchr_inv(head + 4, 0, WB_SECTOR_SIZE - 4);
		DMERR("cache device %s (%pg) holds the writeboost magic but not a valid superblock (non-zero byte at %u of sector 0): refusing to use it, it is neither replayed nor formatted",
		      wb->cache_dev->name, bdev, (unsigned int)(nz - head));
		*error = "The cache device has the magic but no valid superblock";
		return -EINVAL;
	}

	err = wb_check_read_range(wb, WB_BLOCK_SECTORS, head + WB_BLOCK_SIZE,
				  WB_BLANK_BYTES - WB_BLOCK_SIZE);
	if (!err)
		err = wb_check_read_range(wb, tail_start, tail, WB_BLANK_BYTES);
	if (err) {
		*error = "Cannot read the start and end of the cache device";
		return err;
	}

	nz = memchr_inv(head, 0, WB_BLANK_BYTES);
	if (nz) {
		at = nz - head;
	} else {
		nz = memchr_inv(tail, 0, WB_BLANK_BYTES);
		at = nz ? ((u64)tail_start << WB_SECTOR_SHIFT) + (nz - tail) : 0;
	}
	if (!nz) {
		*blank = true;
		return 0;
	}
	if (wb_wiped_cache_start(head)) {
		DMINFO("cache device %s (%pg): first 4 KiB zero over this target's trust record, a cache whose start was wiped: formatted as a new cache",
		       wb->cache_dev->name, bdev);
		*blank = true;
		return 0;
	}

	what = wb_head_signature(head);
	if (!what)
		what = wb_tail_signature(tail, tail_start, size);
	if (!what && hweight32(magic ^ WB_MAGIC) <= 2)
		what = "a damaged writeboost superblock";
	if (what)
		DMERR("cache device %s (%pg) holds %s (first non-zero byte at %llu; bytes 0-7: %8phN), not a writeboost cache: refusing to use it; zero its first and last MiB to have it formatted as a new cache",
		      wb->cache_dev->name, bdev, what, at, head);
	else
		DMERR("cache device %s (%pg) holds non-zero data at byte %llu (bytes 0-7: %8phN), not a writeboost cache: refusing to use it; zero its first and last MiB to have it formatted as a new cache",
		      wb->cache_dev->name, bdev, at, head);
	*error = "The cache device is neither a writeboost cache nor blank (see log)";
	return -EINVAL;
}
