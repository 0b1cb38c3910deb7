// SPDX-License-Identifier: GPL-2.0
/*
 * dm-wbkit-metadata.c - the dead state, synchronous and asynchronous I/O,
 * the hash table, cache formatting, the cache signature and log replay.
 *
 * The format and the replay rules are docs/FORMAT.md; the structures are
 * format/wbkit_format.h.
 */
#include <linux/crc32c.h>
#include <linux/hash.h>
#include <linux/highmem.h>
#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>
#include <linux/bitops.h>
#include <linux/sizes.h>
#include <linux/string.h>

#include "dm-wbkit.h"

#define DM_MSG_PREFIX "writeboost"

/*
 * CRC-32C (Castagnoli) of bytes [512, 4096 * (length + 1)) of a segment:
 * the metablock area and the data blocks. Stored little-endian.
 */
u32 wb_checksum(const void *seg_buf, u8 length)
{
	return ~crc32c(0xffffffff, seg_buf + WB_SEGMENT_HEADER_SIZE,
		       wb_seg_bytes(length) - WB_SEGMENT_HEADER_SIZE);
}

/* ---------------------------------------------------------------------- */
/* The dead state (fail-stop, like dm-writecache) */

static const char *wb_dev_name(enum wb_dev_kind dev)
{
	return dev == WB_DEV_CACHE ? "cache" : "backing";
}

const char *wb_op_name(enum wb_op op)
{
	return op == WB_OP_READ ? "read" : op == WB_OP_WRITE ? "write" : "flush";
}

/* Every error of either device counts, fatal or not (message error_counts). */
void wb_count_error(struct wb_device *wb, enum wb_dev_kind dev, enum wb_op op)
{
	atomic64_inc(&wb->nr_errors[(dev == WB_DEV_CACHE ? WB_ERR_CACHE_READ :
				     WB_ERR_BACKING_READ) + op]);
}

/*
 * A bio from above failed on the backing device, and the target goes on
 * (the fault table's rows that touch nothing the cache holds). Callable
 * from bio completion.
 */
void wb_fail_request(struct wb_device *wb, enum wb_op op, u64 sector, int err)
{
	wb_count_error(wb, WB_DEV_BACKING, op);
	atomic64_inc(&wb->nr_errors[WB_ERR_FAILED_REQUESTS]);
	DMERR_LIMIT("backing device %s error %d at sector %llu: this request fails, the target goes on",
		    wb_op_name(op), err, (unsigned long long)sector);
}

/*
 * Records the first fatal error and kills the target. Callable from any
 * context, including bio completion. The first caller wins the cmpxchg and
 * is the only one that logs; the state never clears. kmod/README.md's
 * fault table lists the callers: errors that put data the cache holds at
 * risk.
 */
void wb_set_dead(struct wb_device *wb, enum wb_dev_kind dev, enum wb_op op,
		 u64 sector, int err)
{
	if (!err)
		err = -EIO;
	wb_count_error(wb, dev, op);
	if (cmpxchg(&wb->dead_err, 0, err) != 0)
		return;

	wb->cause.err = err;
	wb->cause.dev = dev;
	wb->cause.op = op;
	wb->cause.sector = sector;
	smp_mb__before_atomic();	/* the cause is visible before the flag */
	set_bit(WB_F_DEAD, &wb->flags);

	if (err != -EIO)
		DMWARN("unexpected error %d from the %s device, treated as fatal",
		       err, wb_dev_name(dev));
	DMERR("%s device %s error %d at sector %llu: target is dead, all I/O now fails",
	      wb_dev_name(dev), wb_op_name(op), err, (unsigned long long)sector);

	wake_up_all(&wb->wait);
	wake_up_all(&wb->writeback_wait);
	wake_up_all(&wb->copy_wait);
	/* The flusher fails the flush/FUA bios that wait for a commit. */
	if (wb->flush_wq)
		queue_work(wb->flush_wq, &wb->flush_work);
}

/* ---------------------------------------------------------------------- */
/* I/O helpers. Buffers are kmalloc'ed, page or vmalloc memory. */

static struct page *wb_buf_page(void *p)
{
	return is_vmalloc_addr(p) ? vmalloc_to_page(p) : virt_to_page(p);
}

static struct bio *wb_build_bio(struct wb_device *wb, enum wb_dev_kind dev,
				blk_opf_t opf, sector_t sector, void *buf,
				unsigned int len)
{
	unsigned int nr = DIV_ROUND_UP(offset_in_page(buf) + len, PAGE_SIZE);
	struct bio *bio;

	/* The target's own pool: no competition with file systems above. */
	bio = bio_alloc_bioset(wb_bdev(wb, dev), len ? nr : 0, opf, GFP_NOIO,
			       &wb->bio_set);
	bio->bi_iter.bi_sector = sector;
	container_of(bio, struct wb_bio, bio)->sector = sector;
	while (len) {
		unsigned int off = offset_in_page(buf);
		unsigned int chunk = min_t(unsigned int, len, PAGE_SIZE - off);

		/* Cannot fail: the bio has a vector per page. */
		__bio_add_page(bio, wb_buf_page(buf), chunk, off);
		buf += chunk;
		len -= chunk;
	}
	return bio;
}

static enum wb_op wb_opf_op(blk_opf_t opf)
{
	return op_is_write(opf) ? WB_OP_WRITE : WB_OP_READ;
}

/*
 * Synchronous I/O that leaves the verdict on an error to the caller (it
 * counts it): a read for one bio, whose failure fails that bio alone.
 * Transient errors are waited out and retried. Nothing is issued once the
 * target is dead.
 */
int wb_sync_io_nofail(struct wb_device *wb, enum wb_dev_kind dev,
		      blk_opf_t opf, sector_t sector, void *buf,
		      unsigned int len)
{
	bool vm = is_vmalloc_addr(buf);
	struct bio *bio;
	int err;

	for (;;) {
		if (wb_dead(wb))
			return -EIO;
		if (vm && op_is_write(opf))
			flush_kernel_vmap_range(buf, len);
		bio = wb_build_bio(wb, dev, opf, sector, buf, len);
		err = submit_bio_wait(bio);
		bio_put(bio);
		if (!wb_retry_transient(wb, err))
			break;
	}
	if (!err && vm && !op_is_write(opf))
		invalidate_kernel_vmap_range(buf, len);
	return err;
}

/* The same for the target's own I/O: any error but a transient one kills. */
int wb_sync_io(struct wb_device *wb, enum wb_dev_kind dev, blk_opf_t opf,
	       sector_t sector, void *buf, unsigned int len)
{
	int err = wb_sync_io_nofail(wb, dev, opf, sector, buf, len);

	if (err && !wb_dead(wb))
		wb_set_dead(wb, dev, wb_opf_op(opf), sector, err);
	return err;
}

/*
 * A read of the cache device by the first resume (the log's replay): an
 * error fails that resume and puts nothing at risk (nothing the log holds
 * is lost by not reading it now), so it counts and does not kill. The
 * next resume replays from scratch (wb_replay_reset), as the fault table
 * says: a transient fault can be retried.
 */
static int wb_replay_read(struct wb_device *wb, sector_t sector, void *buf,
			  unsigned int len)
{
	int err = wb_sync_io_nofail(wb, WB_DEV_CACHE, REQ_OP_READ, sector, buf,
				    len);

	if (err && !wb_dead(wb)) {
		wb_count_error(wb, WB_DEV_CACHE, WB_OP_READ);
		DMERR_LIMIT("cache device read error %d at sector %llu while replaying the log: this resume fails, nothing was lost, a later resume replays again",
			    err, (unsigned long long)sector);
	}
	return err;
}

int wb_flush_dev(struct wb_device *wb, enum wb_dev_kind dev)
{
	int err;

	for (;;) {
		if (wb_dead(wb))
			return -EIO;
		err = blkdev_issue_flush(wb_bdev(wb, dev));
		if (!wb_retry_transient(wb, err))
			break;
	}
	if (err)
		wb_set_dead(wb, dev, WB_OP_FLUSH, 0, err);
	return err;
}

/* Asynchronous I/O: submit any number, then wait for all. */
void wb_aio_init(struct wb_aio *aio)
{
	atomic_set(&aio->pending, 1);
	aio->err = 0;
	aio->err_sector = 0;
	init_completion(&aio->done);
}

static void wb_aio_put(struct wb_aio *aio)
{
	if (atomic_dec_and_test(&aio->pending))
		complete(&aio->done);
}

static void wb_aio_endio(struct bio *bio)
{
	struct wb_aio *aio = bio->bi_private;

	/* bi_iter has advanced by now: the start sector was kept aside. */
	if (bio->bi_status &&
	    cmpxchg(&aio->err, 0, blk_status_to_errno(bio->bi_status)) == 0)
		aio->err_sector = container_of(bio, struct wb_bio, bio)->sector;
	bio_put(bio);
	wb_aio_put(aio);
}

void wb_aio_submit(struct wb_device *wb, struct wb_aio *aio,
		   enum wb_dev_kind dev, blk_opf_t opf, sector_t sector,
		   void *buf, unsigned int len)
{
	struct bio *bio;

	if (wb_dead(wb)) {
		cmpxchg(&aio->err, 0, -EIO);
		return;
	}
	if (is_vmalloc_addr(buf) && op_is_write(opf))
		flush_kernel_vmap_range(buf, len);
	bio = wb_build_bio(wb, dev, opf, sector, buf, len);
	bio->bi_private = aio;
	bio->bi_end_io = wb_aio_endio;
	atomic_inc(&aio->pending);
	submit_bio(bio);
}

int wb_aio_wait(struct wb_aio *aio)
{
	struct wb_wait_clock clock = { jiffies, false };

	wb_aio_put(aio);
	/* Woken every slice for the hung-task detector, see wb_wait_io. */
	while (!wait_for_completion_io_timeout(&aio->done, WB_WAIT_SLICE))
		wb_wait_slow(&clock, __func__, __LINE__);
	return aio->err;
}

/* ---------------------------------------------------------------------- */
/* Hash table: backing block -> newest copy on the cache, dirty or clean */

static struct hlist_head *wb_ht_head(struct wb_device *wb, sector_t block)
{
	return &wb->htable[hash_64(block >> 3, wb->htable_bits)];
}

struct wb_metablock *wb_ht_lookup(struct wb_device *wb, sector_t block)
{
	struct wb_metablock *mb;

	hlist_for_each_entry(mb, wb_ht_head(wb, block), ht_node)
		if (mb->sector == block)
			return mb;
	return NULL;
}

void wb_ht_add(struct wb_device *wb, struct wb_metablock *mb)
{
	hlist_add_head(&mb->ht_node, wb_ht_head(wb, mb->sector));
	if (mb->dirty)
		wb->nr_dirty++;
}

void wb_ht_del(struct wb_device *wb, struct wb_metablock *mb)
{
	hlist_del_init(&mb->ht_node);
	if (mb->dirty)
		wb->nr_dirty--;
}

/* Takes the first n entries of seg out of the lookup. */
void wb_unhash_entries(struct wb_device *wb, struct wb_segment *seg,
		       unsigned int n)
{
	unsigned int j;

	for (j = 0; j < n; j++)
		if (!hlist_unhashed(&seg->mb[j].ht_node))
			wb_ht_del(wb, &seg->mb[j]);
}

/* Its data is on the backing device; a hashed copy keeps serving reads. */
void wb_mark_clean(struct wb_device *wb, struct wb_metablock *mb)
{
	if (mb->dirty && !hlist_unhashed(&mb->ht_node))
		wb->nr_dirty--;
	mb->dirty = false;
}

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
static int wb_format(struct wb_device *wb, char **error)
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

/* ---------------------------------------------------------------------- */
/* Replay */

/* Writes the sectors in bits of a block held in buf to the backing device. */
static int wb_write_runs(struct wb_device *wb, sector_t block, u8 bits,
			 void *buf)
{
	unsigned int i, j;
	int err;

	for (i = 0; wb_next_run(bits, &i, &j); i = j) {
		err = wb_sync_io(wb, WB_DEV_BACKING, REQ_OP_WRITE, block + i,
				 buf + (i << WB_SECTOR_SHIFT),
				 (j - i) << WB_SECTOR_SHIFT);
		if (err)
			return err;
	}
	return 0;
}

/* Bits of a block that lie inside the target. */
static u8 wb_bits_in_range(struct wb_device *wb, sector_t block)
{
	sector_t len = wb->ti->len;

	if (block + WB_BLOCK_SECTORS <= len)
		return WB_ALL_DIRTY;
	return (u8)((1U << (len - block)) - 1);
}

/*
 * Applies one valid segment (docs/FORMAT.md, replay step 3): per block the
 * newest entry wins. A newer partial entry leaves the older entry's other
 * dirty sectors to it: like upstream, those go to the backing device, so
 * that the hash table only ever needs the newest copy of a block; but only
 * after the walk, once last_writeback_id is known (wb_write_kept_sectors).
 * A newer clean entry makes the older dirty data obsolete.
 */
static void wb_apply_segment(struct wb_device *wb, struct wb_segment *seg,
			     void *buf)
{
	struct wb_segment_header_device *hdr = buf;
	unsigned int j;

	seg->id = le64_to_cpu(hdr->id);
	seg->length = hdr->length;
	for (j = 0; j < seg->length; j++) {
		struct wb_metablock_device *md = buf + WB_METABLOCK_OFFSET(j);
		struct wb_metablock *mb = &seg->mb[j];
		struct wb_metablock *old;
		u8 bits = md->dirty_bits;

		mb->sector = le64_to_cpu(md->sector);
		mb->data_bits = bits;
		mb->dirty = bits;
		mb->obsolete = false;
		mb->replay_keep = 0;
		/* Never trust the disk: a block must lie inside the target. */
		if ((mb->sector & (WB_BLOCK_SECTORS - 1)) ||
		    mb->sector >= wb->ti->len) {
			DMWARN_LIMIT("segment %llu block %u names sector %llu outside the target: ignored",
				     (unsigned long long)seg->id, j,
				     (unsigned long long)mb->sector);
			mb->data_bits = 0;
			mb->dirty = false;
			continue;
		}
		bits &= wb_bits_in_range(wb, mb->sector);
		mb->data_bits = bits;
		mb->dirty = bits;
		/* A read-cache block: a copy of the backing device's block. */
		if (!bits && wb_clean_copy_trusted(seg->id, wb->trusted_from_id))
			mb->data_bits = wb_bits_in_range(wb, mb->sector);

		old = wb_ht_lookup(wb, mb->sector);
		if (old) {
			old->replay_keep = old->data_bits &
					   ~wb_entry_sectors(bits);
			wb_ht_del(wb, old);
			old->obsolete = true;
		}
		if (mb->data_bits)
			wb_ht_add(wb, mb);
	}
}

/*
 * Undoes the walk's steps before `upto` (wb_torn_rewrite: they were being
 * rewritten): their entries leave the hash table. Nothing was written for
 * them; the sectors they left to newer entries (replay_keep) are never
 * written either: their segments end up at or below last_writeback_id.
 */
static void wb_forget_applied(struct wb_device *wb, u64 start, u64 upto)
{
	struct wb_segment *seg;
	u64 i;

	for (i = 0; i < upto; i++) {
		seg = &wb->segs[wb_ring_slot(start, i, wb->nr_segments)];
		wb_unhash_entries(wb, seg, seg->length);
		seg->length = 0;
	}
}

/*
 * Writes the sectors that older entries left to newer partial ones
 * (wb_apply_segment) to the backing device, for the segments after
 * last_writeback_id only (wb_segment_written_back): an older one is on
 * the backing device, maybe under newer data written back after it. In id
 * order, as the walk met them: the entries of one block are superseded in
 * the order of their segments, so the newest write of a sector comes last.
 */
static int wb_write_kept_sectors(struct wb_device *wb, u64 last_id, u64 lw,
				 bool *wrote_backing)
{
	struct wb_segment *seg;
	struct wb_metablock *mb;
	unsigned int j;
	u64 k, id;
	int err;

	for (k = 0; lw < last_id && k < last_id - lw; k++) {
		id = lw + 1 + k;
		seg = wb_seg_of_id(wb, id);
		if (seg->id != id || wb_segment_written_back(seg->id, lw))
			continue;
		for (j = 0; j < seg->length; j++) {
			mb = &seg->mb[j];
			if (!mb->replay_keep)
				continue;
			err = wb_replay_read(wb, wb_mb_cache_sector(wb, mb),
					     wb->bounce2, WB_BLOCK_SIZE);
			if (!err)
				err = wb_write_runs(wb, mb->sector,
						    mb->replay_keep,
						    wb->bounce2);
			if (err)
				return err;
			mb->replay_keep = 0;
			*wrote_backing = true;
		}
		cond_resched();
	}
	return 0;
}

/*
 * Reads the id of every slot into segs[].id, many slots at a time: the
 * per-slot round trip would dominate the construction of a large cache.
 * Only the first logical block of each header is read.
 */
static int wb_scan_ids(struct wb_device *wb, u64 *max_id)
{
	unsigned int hdr_bytes = wb_header_lbs(wb);
	unsigned int per_round = WB_SCRATCH_SIZE / hdr_bytes;
	u64 k, first, n;
	struct wb_aio aio;
	int err;

	*max_id = 0;
	for (first = 0; first < wb->nr_segments; first += n) {
		n = min_t(u64, wb->nr_segments - first, per_round);
		do {
			if (wb_dead(wb))
				return -EIO;
			wb_aio_init(&aio);
			for (k = 0; k < n; k++)
				wb_aio_submit(wb, &aio, WB_DEV_CACHE,
					      REQ_OP_READ,
					      wb_slot_start_sector(first + k),
					      wb_scratch(wb) + k * hdr_bytes,
					      hdr_bytes);
			err = wb_aio_wait(&aio);
		} while (wb_retry_transient(wb, err));
		if (err) {
			/* As wb_replay_read: this resume fails, a later one retries. */
			wb_count_error(wb, WB_DEV_CACHE, WB_OP_READ);
			DMERR("cache device read error %d at sector %llu while reading the segment headers: this resume fails, nothing was lost, a later resume replays again",
			      err, (unsigned long long)aio.err_sector);
			return err;
		}
		invalidate_kernel_vmap_range(wb_scratch(wb), n * hdr_bytes);
		for (k = 0; k < n; k++) {
			void *p = wb_scratch(wb) + k * hdr_bytes;
			u64 id;

			id = le64_to_cpu(((struct wb_segment_header_device *)p)->id);
			wb->segs[first + k].id = id;
			*max_id = max(*max_id, id);
		}
		cond_resched();
	}
	return 0;
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

/*
 * The trust record's value, WB_TRUST_NONE without its magic; *present says
 * whether the magic is there (this target wrote the cache).
 */
static int wb_read_trust(struct wb_device *wb, u64 *trusted_from_id,
			 bool *present)
{
	struct wb_clean_trust_device *rec = wb->bounce;
	int err;

	err = wb_replay_read(wb, WB_TRUST_SECTOR, wb->bounce, WB_BLOCK_SIZE);
	if (err)
		return err;
	*present = le32_to_cpu(rec->magic) == WB_TRUST_MAGIC;
	*trusted_from_id = *present ? le64_to_cpu(rec->trusted_from_id) :
				      WB_TRUST_NONE;
	wb->trust_nr_segments = *present ? le64_to_cpu(rec->nr_segments) : 0;
	return 0;
}

/*
 * Construction refuses a log it cannot read as one ring in id order
 * (wb_replay_decide): it writes nothing, and says where to go (the tools
 * show and salvage what the log holds; replaying part of it here would
 * discard or reorder acknowledged data).
 */
static int wb_refuse_log(const struct wb_replay_plan *p, char **error)
{
	DMERR("slot %llu, segment %llu: %s. Not replayed; see wbdump and wbrecover",
	      (unsigned long long)p->refusal_slot,
	      (unsigned long long)p->refusal_id,
	      wb_replay_refusal_text(p->refusal));
	*error = "Damaged log on the cache device (see the kernel log): use wbdump, wbrecover";
	return -EINVAL;
}

/*
 * Forgets what an earlier replay of this instance left in memory: a first
 * resume that failed (an I/O error, a refused log) is retried from scratch
 * by the next resume, not on top of the entries the first one applied.
 */
static void wb_replay_reset(struct wb_device *wb)
{
	u64 k;

	for (k = 0; k < wb->nr_segments; k++) {
		struct wb_segment *seg = &wb->segs[k];

		wb_unhash_entries(wb, seg, seg->length);
		seg->length = 0;
		seg->id = 0;
		if (!(k & 1023))
			cond_resched();
	}
	wb->nr_dirty = 0;
	wb->last_sealed_id = 0;
	wb->last_flushed_id = 0;
	wb->last_durable_id = 0;
	wb->last_writeback_id = 0;
}

/*
 * Reads slot `slot` (header and written data) into buf and says what it
 * holds, for the shared walk. The header must still hold the id the scan
 * found (*changed otherwise: the device changed under the replay).
 */
static int wb_read_slot(struct wb_device *wb, u32 slot, void *buf,
			enum wb_slot_verdict *verdict, bool *changed)
{
	struct wb_segment_header_device *hdr = buf;
	u8 length;
	int err;

	err = wb_replay_read(wb, wb_slot_start_sector(slot), buf, WB_BLOCK_SIZE);
	if (err)
		return err;
	*changed = le64_to_cpu(hdr->id) != wb->segs[slot].id;
	length = hdr->length;
	if (length > WB_BLOCKS_PER_SEGMENT) {
		*verdict = WB_SLOT_BAD;
		return 0;
	}
	if (length) {
		err = wb_replay_read(wb, wb_data_block_sector(slot, 0),
				     buf + WB_BLOCK_SIZE,
				     length * WB_BLOCK_SIZE);
		if (err)
			return err;
	}
	*verdict = wb_checksum(buf, length) == le32_to_cpu(hdr->checksum) ?
		   WB_SLOT_VALID : WB_SLOT_BAD;
	return 0;
}

/*
 * Replay, docs/FORMAT.md steps 1-4, by the decision the tools share
 * (wb_replay_walk_slot, wb_replay_decide in format/wbkit_format.h): find
 * the largest id, walk the ring from the oldest slot reading each segment
 * and doing what the walk says (apply it, forget what was applied: a torn
 * rewrite, stop), then ask what the log means. Only then is anything
 * written: wb_apply_segment changes memory only, so a refused log leaves
 * the devices as they were.
 *
 * Before the target goes live the disk is made to say what was replayed,
 * each write with FUA, in this order: the trust record when the decision
 * lowered it (a superblock record beyond the log: the backing device may
 * be newer than any copy), the headers of the slots the walk discarded
 * zeroed (a torn rewrite, the slots before it, segments lost in flight,
 * so the log reads the same once the trust record is written), the stop
 * slot's header zeroed (the torn newest
 * segment: new segments reuse its id), the superblock record when it
 * named a segment beyond the log (new segments would count as written
 * back by it), then the older sectors left to newer partial entries.
 */
static int wb_replay(struct wb_device *wb, char **error)
{
	struct wb_replay_walk walk;
	struct wb_replay_plan plan;
	void *buf = wb->rambuf[0];
	bool wrote_backing = false;
	u64 max_id = 0, record, k, step;
	bool trust_record;
	int err;

	wb_replay_reset(wb);
	err = wb_scan_ids(wb, &max_id);
	if (err)
		goto io_error;
	err = wb_read_trust(wb, &wb->trusted_from_id, &trust_record);
	if (err)
		goto io_error;

	wb_replay_walk_begin(&walk, wb->nr_segments, max_id, !trust_record);
	for (step = 0; step < wb->nr_segments; step++) {
		u32 slot = (u32)wb_ring_slot(walk.oldest_slot, step,
					     wb->nr_segments);
		u64 id = wb->segs[slot].id;
		enum wb_slot_verdict verdict = id ? WB_SLOT_VALID : WB_SLOT_EMPTY;
		bool changed = false;

		/* Past the stop only the slot of each id counts: no read. */
		if (id && !walk.stopped) {
			err = wb_read_slot(wb, slot, buf, &verdict, &changed);
			if (err)
				goto io_error;
			if (changed) {
				DMERR("slot %u changed while the log was replayed: is another writer using the cache device?",
				      slot);
				*error = "The cache device changed during replay";
				return -EBUSY;
			}
		}
		switch (wb_replay_walk_slot(&walk, step, id, verdict)) {
		case WB_WALK_APPLY:
			wb_apply_segment(wb, &wb->segs[slot], buf);
			break;
		case WB_WALK_RESTART:
			DMWARN("slot %u: a torn rewrite over segment %llu (a log another writer left): the log starts after it, the segments up to it count as written back",
			       slot, (unsigned long long)id);
			wb_forget_applied(wb, walk.oldest_slot, step);
			break;
		case WB_WALK_STOP:
			DMWARN("segment %llu in slot %u is torn or damaged: the log ends at segment %llu",
			       (unsigned long long)id, slot,
			       (unsigned long long)walk.last_applied_id);
			break;
		case WB_WALK_LOST:
			DMWARN("slot %u: segment %llu, one lap old, where a later segment landed (a log another writer left): a segment write lost in flight, skipped",
			       slot, (unsigned long long)id);
			break;
		case WB_WALK_SKIP:
			break;
		}
		cond_resched();
	}

	/* The record: sector 2047, read as the 4 KiB block 2040..2047. */
	err = wb_replay_read(wb, WB_SB_RECORD_SECTOR + 1 - WB_BLOCK_SECTORS,
			     wb->bounce, WB_BLOCK_SIZE);
	if (err)
		goto io_error;
	record = le64_to_cpu(((struct wb_superblock_record_device *)
			      (wb->bounce + WB_BLOCK_SIZE - WB_SECTOR_SIZE))
			     ->last_writeback_segment_id);

	wb_replay_decide(&walk, record, wb->trusted_from_id, &plan);
	wb_replay_check_ring(&plan, wb->trust_nr_segments, wb->nr_segments);
	if (plan.refusal != WB_REPLAY_OK)
		return wb_refuse_log(&plan, error);

	if (plan.write_trust) {
		DMWARN("the superblock record names segment %llu, beyond the last replayed segment %llu: no copy of the log serves reads as clean",
		       (unsigned long long)record,
		       (unsigned long long)plan.last_flushed_id);
		err = wb_write_trust(wb, plan.trusted_from_id);
		if (err)
			goto io_error;
	}
	wb->trusted_from_id = plan.trusted_from_id;

	/*
	 * The slots the walk discarded (a torn rewrite and the slots before
	 * it, segments lost in flight) go before the trust record does (in
	 * wb_format_or_replay): with the record there, the next replay reads
	 * them as damage and refuses the log. In the plan's order, the torn
	 * rewrite last, each with FUA: while it stands, a replay after a cut
	 * here still starts the log after it.
	 */
	for (k = 0; k < plan.nr_drop_slots; k++) {
		u64 slot = plan.drop_slot[k];

		wb->segs[slot].id = 0;
		err = wb_sync_io(wb, WB_DEV_CACHE, REQ_OP_WRITE | REQ_FUA,
				 wb_slot_start_sector(slot), wb->zero_block,
				 wb_header_lbs(wb));
		if (err)
			goto io_error;
	}

	/* The torn newest segment is not part of the log. */
	if (plan.zero_stop_slot) {
		wb->segs[plan.stop_slot].id = 0;
		err = wb_sync_io(wb, WB_DEV_CACHE, REQ_OP_WRITE | REQ_FUA,
				 wb_slot_start_sector(plan.stop_slot),
				 wb->zero_block, wb_header_lbs(wb));
		if (err)
			goto io_error;
	}

	if (plan.rewrite_record) {
		DMWARN("the superblock record names segment %llu, beyond the last replayed segment %llu: rewritten to %llu",
		       (unsigned long long)record,
		       (unsigned long long)plan.last_flushed_id,
		       (unsigned long long)plan.last_writeback_id);
		wb_write_sb_record(wb, wb->bounce, plan.last_writeback_id);
		if (wb_dead(wb)) {
			err = -EIO;
			goto io_error;
		}
	}

	err = wb_write_kept_sectors(wb, plan.last_flushed_id,
				    plan.last_writeback_id, &wrote_backing);
	if (err)
		goto io_error;

	/*
	 * Segments up to lw are on the backing device: nothing in them is
	 * dirty. Their newest copies keep serving reads, as after a writeback
	 * at run time, when the trust record allows it.
	 */
	for (k = 0; k < wb->nr_segments; k++) {
		struct wb_segment *seg = &wb->segs[k];
		bool trusted = wb_clean_copy_trusted(seg->id, wb->trusted_from_id);
		unsigned int j;

		if (!(k & 1023))
			cond_resched();
		if (!seg->id || seg->id > plan.last_writeback_id)
			continue;
		for (j = 0; j < seg->length; j++) {
			struct wb_metablock *mb = &seg->mb[j];

			if (hlist_unhashed(&mb->ht_node))
				continue;
			if (trusted)
				wb_mark_clean(wb, mb);
			else
				wb_ht_del(wb, mb);
		}
	}

	/*
	 * Older dirty sectors written after the walk must be durable before
	 * their segments can be written back (and their slots reused).
	 */
	if (wrote_backing) {
		err = wb_flush_dev(wb, WB_DEV_BACKING);
		if (err)
			goto io_error;
	}
	/*
	 * What the walk read may still sit in the cache device's volatile
	 * cache (a crash without a power cut): made durable, the replayed
	 * segments may be written back and named by the record at once.
	 */
	err = wb_flush_dev(wb, WB_DEV_CACHE);
	if (err)
		goto io_error;

	wb->last_sealed_id = plan.last_flushed_id;
	wb->last_durable_id = plan.last_flushed_id;
	wb->last_writeback_id = plan.last_writeback_id;
	wb->last_flushed_id = plan.last_flushed_id;
	DMINFO("replayed the log: max id %llu, last flushed %llu, last written back %llu, %llu dirty blocks",
	       (unsigned long long)max_id,
	       (unsigned long long)plan.last_flushed_id,
	       (unsigned long long)plan.last_writeback_id,
	       (unsigned long long)wb->nr_dirty);
	return 0;

io_error:
	*error = "I/O error while replaying the log of the cache device";
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

/*
 * Called by the first preresume, never by the constructor: both write. A
 * blank cache device is formatted, one with a valid superblock is
 * replayed; anything else is refused (wb_check_cache_signature; checked
 * again: the device may have changed since the constructor looked).
 */
int wb_format_or_replay(struct wb_device *wb, char **error)
{
	bool blank;
	int err;

	err = wb_check_cache_signature(wb, &blank, error);
	if (err)
		return err;
	/*
	 * The read cache logs what the backing device returns as trusted
	 * clean copies. Writes an earlier user left in its volatile cache (a
	 * linear table before wbctl attach, a write-around session) must be
	 * on its media first, or a power cut of that disk leaves a copy newer
	 * than the block it copies (docs/FORMAT.md, "Durability across the
	 * two devices").
	 */
	err = wb_flush_dev(wb, WB_DEV_BACKING);
	if (err) {
		*error = "I/O error while flushing the backing device";
		return err;
	}
	if (blank) {
		err = wb_format(wb, error);
		if (err)
			return err;
		wb->last_sealed_id = 0;
		wb->last_flushed_id = 0;
		wb->last_writeback_id = 0;
		return 0;
	}
	err = wb_replay(wb, error);
	if (err)
		return err;
	/*
	 * Entries the trust record did not cover stay out of the lookup; the
	 * segments this instance writes are trusted, in write-back mode (see
	 * wb_write_around_start), once the record says so.
	 */
	if (!wb->write_around &&
	    (!wb_clean_copy_trusted(wb->last_flushed_id + 1, wb->trusted_from_id) ||
	     wb->trust_nr_segments != wb->nr_segments)) {
		/*
		 * Also when the record names another ring size (a grown device,
		 * or a record that predates the field): a later shrink must be
		 * told from the size this log is written in now.
		 */
		u64 from = wb->trusted_from_id;

		if (!wb_clean_copy_trusted(wb->last_flushed_id + 1, from))
			from = wb->last_flushed_id + 1;
		err = wb_write_trust(wb, from);
		if (err) {
			*error = "I/O error while writing the clean-copy trust record";
			return err;
		}
	}
	return 0;
}
