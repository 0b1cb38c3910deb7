// SPDX-License-Identifier: GPL-2.0
/*
 * dm-wbkit-target.c - the "writeboost" device-mapper target: bio path,
 * constructor and destructor, status and messages.
 *
 * A write-back cache in the dm-writeboost style: writes are logged into RAM
 * buffer segments, written to the cache device as whole segments, and later
 * written back to the backing device. The on-disk format is dm-writeboost
 * 2.2's (docs/FORMAT.md), so either target can take over the other's cache.
 * This module registers the same target name as dm-writeboost: the two
 * modules cannot be loaded at the same time.
 */
#include <linux/module.h>
#include <linux/init.h>
#include <linux/bio.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>
#include <linux/log2.h>
#include <linux/hash.h>
#include <linux/sort.h>

#include "dm-wbkit.h"

/* ---------------------------------------------------------------------- */
/* Helpers */

static u8 wb_bio_bits(unsigned int off, unsigned int n)
{
	return (u8)(((1U << n) - 1) << off);
}

static void wb_copy_from_bio(void *dst, struct bio *bio)
{
	struct bvec_iter iter;
	struct bio_vec bv;

	bio_for_each_segment(bv, bio, iter) {
		memcpy_from_bvec(dst, &bv);
		dst += bv.bv_len;
	}
}

static void wb_copy_to_bio(struct bio *bio, const void *src)
{
	struct bvec_iter iter;
	struct bio_vec bv;

	bio_for_each_segment(bv, bio, iter) {
		memcpy_to_bvec(&bv, src);
		src += bv.bv_len;
	}
}

static void wb_stat_inc(struct wb_device *wb, bool write, bool hit,
			bool on_buffer, bool fullsize)
{
	atomic64_inc(&wb->stat[(write << 3) | (hit << 2) | (on_buffer << 1) |
			       fullsize]);
}

static bool wb_slot_free(struct wb_device *wb, u64 id)
{
	return wb_previous_lap_id(id, wb->nr_segments) <=
	       READ_ONCE(wb->last_writeback_id);
}

/*
 * Makes sure there is an open segment (it may be full: the caller seals a
 * full one when it needs a new block and calls again). Called with wb->lock
 * held; drops it while waiting for a RAM buffer or for the writeback of the
 * segment that still occupies the next slot of the ring. Waiting here is
 * safe in .map: the flusher and the writeback daemon never wait for a bio
 * that the caller has not submitted yet.
 */
static int wb_get_cur(struct wb_device *wb)
{
	struct wb_segment *seg;
	unsigned int j;
	u64 id;

	while (!wb->cur) {
		id = wb->last_sealed_id + 1;
		if (wb_dead(wb))
			return -EIO;
		if (!wb_slot_free(wb, id)) {
			wake_up(&wb->wb_wait);
			spin_unlock(&wb->lock);
			wait_event(wb->wait, wb_slot_free(wb, id) || wb_dead(wb));
			spin_lock(&wb->lock);
			continue;
		}
		if (wb->nr_seg_bufs == WB_NR_RAMBUF) {
			spin_unlock(&wb->lock);
			wait_event(wb->wait, READ_ONCE(wb->nr_seg_bufs) <
					     WB_NR_RAMBUF || wb_dead(wb));
			spin_lock(&wb->lock);
			continue;
		}
		if (!wb->nr_free_rambuf) {
			wb_wait_free_buf(wb);
			continue;
		}

		seg = wb_seg_of_id(wb, id);
		/*
		 * Written back: its hashed blocks are clean copies, dropped
		 * from the lookup now. Reads already remapped to them finish
		 * before the flusher writes the new segment here.
		 */
		for (j = 0; j < WB_BLOCKS_PER_SEGMENT; j++)
			if (!hlist_unhashed(&seg->mb[j].ht_node))
				wb_ht_del(wb, &seg->mb[j]);
		/* A ring shorter than the pool: the slot still keeps its buffer. */
		if (seg->buf) {
			wb_reclaim_buf(wb, seg);
			continue;
		}
		seg->id = id;
		seg->length = 0;
		seg->buf = wb->free_rambuf[--wb->nr_free_rambuf];
		wb->nr_seg_bufs++;
		memset(seg->buf, 0, WB_BLOCK_SIZE);
		WRITE_ONCE(wb->cur, seg);
	}
	return 0;
}

static int wb_wait_flushed(struct wb_device *wb, u64 id)
{
	wait_event(wb->wait, READ_ONCE(wb->last_flushed_id) >= id ||
		   wb_dead(wb));
	return wb_dead(wb) ? -EIO : 0;
}

/* Seals what is open and returns the id that must be flushed. */
static u64 wb_seal_for_flush(struct wb_device *wb)
{
	u64 id;

	spin_lock(&wb->lock);
	wb_seal(wb);
	id = wb->last_sealed_id;
	spin_unlock(&wb->lock);
	return id;
}

/* Waits (lock dropped) until no write is copying into mb's block. */
static void wb_wait_copied(struct wb_device *wb, struct wb_metablock *mb)
{
	spin_unlock(&wb->lock);
	wait_event(wb->copy_wait, !READ_ONCE(mb->nr_copying));
	spin_lock(&wb->lock);
}

/*
 * Adds a flush/FUA bio to the commit waiters unless segment id is durable
 * already. Called with wb->lock held; the caller kicks the flusher.
 */
static bool wb_add_commit_waiter(struct wb_device *wb, struct bio *bio, u64 id)
{
	struct wb_per_bio *pb = dm_per_bio_data(bio, sizeof(struct wb_per_bio));

	if (id <= wb->last_durable_id)
		return false;
	pb->commit_id = id;
	bio_list_add(&wb->commit_waiters, bio);
	wb->commit_id = max(wb->commit_id, id);
	if (!wb->cur || id != wb->cur->id)
		return true;
	WRITE_ONCE(wb->nr_open_commits, wb->nr_open_commits + 1);
	if (wb_commit_group_gathered(wb) && wq_has_sleeper(&wb->commit_wait))
		wake_up(&wb->commit_wait);
	return true;
}

/* ---------------------------------------------------------------------- */
/* Read cache (read_cache_threshold, nr_read_cache_cells), as dm-writeboost */

static struct hlist_head *wb_rc_head(struct wb_device *wb, sector_t block)
{
	return &wb->rc_hash[hash_64(block >> 3, wb->rc_hash_bits)];
}

static struct wb_rc_cell *wb_rc_lookup(struct wb_device *wb, sector_t block)
{
	struct wb_rc_cell *cell;

	hlist_for_each_entry(cell, wb_rc_head(wb, block), node)
		if (cell->sector == block)
			return cell;
	return NULL;
}

/* A write makes a staged copy of its block stale. Called with wb->lock held. */
static void wb_rc_invalidate(struct wb_device *wb, sector_t block)
{
	struct wb_rc_cell *cell;

	if (wb->rc_nr_free == wb->rc_nr)
		return;
	cell = wb_rc_lookup(wb, block);
	if (cell)
		cell->cancelled = true;
}

/*
 * Only random reads are cached: once a run of consecutive blocks read grows
 * beyond read_cache_threshold, the run's cells and every later one of it
 * are cancelled. The run's cells are the newest: idx and up.
 */
static void wb_rc_cancel_sequential(struct wb_device *wb, u32 idx,
				    unsigned int thr)
{
	struct wb_rc_cell *cell = &wb->rc_cells[idx];
	u32 i, last;

	if (cell->sector == wb->rc_last_sector + WB_BLOCK_SECTORS) {
		wb->rc_seqcount++;
	} else {
		wb->rc_seqcount = 1;
		wb->rc_over_threshold = false;
	}
	wb->rc_last_sector = cell->sector;
	if (wb->rc_seqcount <= thr)
		return;
	if (wb->rc_over_threshold) {
		cell->cancelled = true;
		return;
	}
	wb->rc_over_threshold = true;
	last = min_t(u32, idx + wb->rc_seqcount, wb->rc_nr);
	for (i = idx; i < last; i++)
		wb->rc_cells[i].cancelled = true;
}

/*
 * The cells' data exists only once read caching has been on (see
 * WB_NR_SPARE_BUFS) and stays until the destructor: a staged read may still
 * copy into it after read caching is switched off. wb_rc_reserve reads the
 * threshold under wb->lock, and rc_data is set under it before the
 * threshold is, so a cell is only ever staged with its data allocated.
 */
static int wb_rc_alloc_data(struct wb_device *wb)
{
	void *data;

	if (READ_ONCE(wb->rc_data))
		return 0;
	data = vmalloc(array_size(wb->rc_nr, WB_BLOCK_SIZE));
	if (!data)
		return -ENOMEM;
	spin_lock(&wb->lock);
	if (!wb->rc_data) {
		wb->rc_data = data;
		data = NULL;
	}
	spin_unlock(&wb->lock);
	vfree(data);	/* a concurrent message allocated it first */
	return 0;
}

/*
 * Stages a full 4 KiB read miss of block: the caller remaps the read to the
 * backing device, and its data goes into the cell when it ends. Called
 * with wb->lock held.
 */
static bool wb_rc_reserve(struct wb_device *wb, struct wb_per_bio *pb,
			  sector_t block)
{
	unsigned int thr = READ_ONCE(wb->tunable[WB_T_READ_CACHE_THRESHOLD]);
	struct wb_rc_cell *cell;
	u32 idx;

	if (!thr || !wb->rc_nr_free || wb_rc_lookup(wb, block))
		return false;
	/*
	 * A write-around write in flight may land after this read has read
	 * the block: its data could be stale. (One that starts later cancels
	 * the cell.)
	 */
	if (atomic_read(&wb->nr_wa_inflight))
		return false;
	idx = --wb->rc_nr_free;
	cell = &wb->rc_cells[idx];
	cell->sector = block;
	cell->cancelled = false;
	cell->failed = false;
	hlist_add_head(&cell->node, wb_rc_head(wb, block));
	wb_rc_cancel_sequential(wb, idx, thr);
	pb->cell = idx;
	return true;
}

/* End of a staged read, in any context: keep the data. */
static void wb_rc_read_done(struct wb_device *wb, struct bio *bio,
			    struct wb_per_bio *pb, bool failed)
{
	void *dst = wb->rc_data + (size_t)pb->cell * WB_BLOCK_SIZE;
	struct bvec_iter iter;
	struct bio_vec bv;

	if (failed) {
		WRITE_ONCE(wb->rc_cells[pb->cell].failed, true);
	} else {
		/* bi_iter has advanced by now: walk the data as it was mapped. */
		__bio_for_each_segment(bv, bio, iter, pb->iter) {
			memcpy_from_bvec(dst, &bv);
			dst += bv.bv_len;
		}
	}
	/* Orders the copy before rc_work reads it. */
	if (atomic_dec_and_test(&wb->rc_pending))
		queue_work(wb->io_wq, &wb->rc_work);
}

/*
 * Puts one staged cell into the open segment as a clean block (dirty_bits 0
 * in the log), unless a write made it stale. Called with wb->lock held; may
 * drop it to wait for a segment. A dead or suspended target injects
 * nothing: the cells are dropped (an error is returned).
 */
static int wb_rc_inject(struct wb_device *wb, struct wb_rc_cell *cell,
			const void *data)
{
	struct wb_metablock_device *md;
	struct wb_metablock *mb;
	struct wb_segment *seg;
	int err;

	for (;;) {
		if (test_bit(WB_F_SUSPENDED, &wb->flags))
			return -EBUSY;
		if (cell->cancelled || READ_ONCE(cell->failed) ||
		    wb_ht_lookup(wb, cell->sector))
			return 0;
		err = wb_get_cur(wb);
		if (err)
			return err;
		seg = wb->cur;
		if (seg->length < WB_BLOCKS_PER_SEGMENT)
			break;
		wb_seal(wb);
	}
	mb = &seg->mb[seg->length];
	/* Under the lock, so that no later write of the block is overtaken. */
	memcpy(seg->buf + WB_BLOCK_SIZE * (1 + seg->length), data,
	       WB_BLOCK_SIZE);
	md = seg->buf + WB_METABLOCK_OFFSET(seg->length);
	md->sector = cpu_to_le64(cell->sector);
	md->dirty_bits = 0;
	mb->sector = cell->sector;
	mb->data_bits = WB_ALL_DIRTY;
	mb->dirty = false;
	mb->obsolete = false;
	wb_ht_add(wb, mb);
	seg->length++;
	return 0;
}

static int wb_rc_key_cmp(const void *a, const void *b)
{
	const struct wb_rc_key *x = a, *y = b;

	if (x->sector != y->sector)
		return x->sector < y->sector ? -1 : 1;
	return 0;
}

/*
 * Every cell of the generation is used and its read ended: cancel the
 * sequential runs among them (in sector order, the reads may have come
 * interleaved), inject the rest, and start a new generation.
 */
static void wb_rc_work(struct work_struct *work)
{
	struct wb_device *wb = container_of(work, struct wb_device, rc_work);
	unsigned int thr = READ_ONCE(wb->tunable[WB_T_READ_CACHE_THRESHOLD]);
	u32 i, j, start = 0;

	for (i = 0; i < wb->rc_nr; i++)
		wb->rc_sorted[i] = (struct wb_rc_key) {
			.sector = wb->rc_cells[i].sector, .idx = i };
	sort(wb->rc_sorted, wb->rc_nr, sizeof(*wb->rc_sorted), wb_rc_key_cmp,
	     NULL);

	spin_lock(&wb->lock);
	for (i = 1; i <= wb->rc_nr; i++) {
		if (i < wb->rc_nr && wb->rc_sorted[i].sector ==
		    wb->rc_sorted[i - 1].sector + WB_BLOCK_SECTORS)
			continue;
		if (i - start > thr)
			for (j = start; j < i; j++)
				wb->rc_cells[wb->rc_sorted[j].idx].cancelled = true;
		start = i;
	}
	/* thr 0: read caching was switched off meanwhile, nothing is injected. */
	for (i = 0; thr && i < wb->rc_nr; i++)
		if (wb_rc_inject(wb, &wb->rc_cells[i],
				 wb->rc_data + (size_t)i * WB_BLOCK_SIZE))
			break;
	for (i = 0; i < (1U << wb->rc_hash_bits); i++)
		INIT_HLIST_HEAD(&wb->rc_hash[i]);
	wb->rc_nr_free = wb->rc_nr;
	atomic_set(&wb->rc_pending, wb->rc_nr);
	spin_unlock(&wb->lock);
}

/* ---------------------------------------------------------------------- */
/* Bio path */

/* An empty flush: everything completed so far, durable on the cache device. */
static void wb_flush_bio(struct wb_device *wb, struct bio *bio)
{
	bool waiting = false;
	int err = 0;
	u64 id;

	spin_lock(&wb->lock);
	if (wb_dead(wb)) {
		err = -EIO;
	} else {
		id = wb->cur && wb->cur->length ? wb->cur->id :
						  wb->last_sealed_id;
		waiting = wb_add_commit_waiter(wb, bio, id);
	}
	spin_unlock(&wb->lock);
	if (waiting) {
		queue_work(wb->flush_wq, &wb->flush_work);
		return;
	}
	bio->bi_status = errno_to_blk_status(err);
	bio_endio(bio);
}

/*
 * A write of up to one 4 KiB block (the target splits at 8 sectors). It
 * takes its block of the open RAM buffer segment under the lock and copies
 * its data outside it. A partial write merges the older dirty sectors of
 * the block, so the newest copy always holds every dirty sector of its
 * block; when that older copy is only on the cache device, the write goes
 * to the worker (in_worker false: returns 1), which reads it. REQ_PREFLUSH
 * and REQ_FUA bios complete once their segment is durable (group commit,
 * wb_flush_work); every other write completes here.
 */
static int wb_write(struct wb_device *wb, struct bio *bio, sector_t sector,
		    bool in_worker)
{
	sector_t block = sector & ~(sector_t)(WB_BLOCK_SECTORS - 1);
	unsigned int off = sector & (WB_BLOCK_SECTORS - 1);
	unsigned int n = bio_sectors(bio);
	u8 bits = wb_bio_bits(off, n);
	bool commit = bio->bi_opf & (REQ_PREFLUSH | REQ_FUA);
	struct wb_metablock *merged = NULL, *old, *mb;
	struct wb_metablock_device *md;
	struct wb_segment *seg, *oseg;
	bool on_buffer, waiting = false;
	u64 merged_id = 0;
	void *dst;
	int err;

	spin_lock(&wb->lock);
retry:
	err = wb_get_cur(wb);
	if (err)
		goto unlock;
	seg = wb->cur;
	old = wb_ht_lookup(wb, block);
	on_buffer = old && wb_mb_seg(wb, old) == seg;
	/*
	 * A full segment stays open until a write needs a new block, as in
	 * dm-writeboost: overwrites of its blocks still land in place and
	 * count as on_buffer.
	 */
	if (!on_buffer && seg->length == WB_BLOCKS_PER_SEGMENT) {
		wb_seal(wb);
		goto retry;
	}

	if (on_buffer) {
		/* Overwrite in place in the open segment. */
		mb = old;
		dst = seg->buf + WB_BLOCK_SIZE * (1 + wb_mb_idx(wb, mb));
		if (!mb->dirty)
			wb->nr_dirty++;
		mb->dirty = true;
		mb->data_bits |= bits;
	} else {
		/* A clean copy's sectors are all on the backing device. */
		u8 keep = old && old->dirty ? old->data_bits & ~bits : 0;
		const void *src = NULL;
		u8 idx = seg->length;

		if (keep) {
			if (old->nr_copying) {
				wb_wait_copied(wb, old);
				goto retry;
			}
			oseg = wb_mb_seg(wb, old);
			if (oseg->buf) {
				src = oseg->buf + WB_BLOCK_SIZE * (1 + wb_mb_idx(wb, old));
			} else if (merged == old && merged_id == oseg->id) {
				/* Read below; the slot was pinned meanwhile. */
				src = wb->bounce2;
			} else if (!in_worker) {
				spin_unlock(&wb->lock);
				return 1;
			}
			if (!src) {
				sector_t cs = wb_mb_cache_sector(wb, old);

				atomic_inc(&oseg->nr_dev_readers);
				merged = old;
				merged_id = oseg->id;
				spin_unlock(&wb->lock);
				err = wb_sync_io(wb, WB_DEV_CACHE, REQ_OP_READ, cs,
						 wb->bounce2, WB_BLOCK_SIZE);
				wb_unpin_dev(wb, oseg);
				if (err)
					goto done;
				/* Newer writes may have come meanwhile: look again. */
				spin_lock(&wb->lock);
				goto retry;
			}
		}
		mb = &seg->mb[idx];
		dst = seg->buf + WB_BLOCK_SIZE * (1 + idx);
		/*
		 * Short (4 KiB) and only for partial writes: under the lock,
		 * so that src stays put and a write into this block that
		 * starts after the unlock cannot be overwritten by it.
		 */
		if (keep)
			memcpy(dst, src, WB_BLOCK_SIZE);
		else if (bits != WB_ALL_DIRTY)
			/* Clean sectors are never read; keep them zero. */
			memset(dst, 0, WB_BLOCK_SIZE);
		if (old)
			wb_ht_del(wb, old);
		mb->sector = block;
		mb->data_bits = bits | keep;
		mb->dirty = true;
		mb->obsolete = false;
		wb_ht_add(wb, mb);
		seg->length++;
	}
	wb_rc_invalidate(wb, block);
	wb_stat_inc(wb, true, !!old, on_buffer, n == WB_BLOCK_SECTORS);

	md = seg->buf + WB_METABLOCK_OFFSET(wb_mb_idx(wb, mb));
	md->sector = cpu_to_le64(mb->sector);
	md->dirty_bits = mb->data_bits;
	mb->nr_copying++;
	seg->nr_writers++;
	spin_unlock(&wb->lock);

	wb_copy_from_bio(dst + (off << WB_SECTOR_SHIFT), bio);

	spin_lock(&wb->lock);
	mb->nr_copying--;
	seg->nr_writers--;
	/* Only now: the flusher may complete the bio as soon as it is listed. */
	if (commit && !wb_dead(wb))
		waiting = wb_add_commit_waiter(wb, bio, seg->id);
	err = commit && wb_dead(wb) ? -EIO : 0;
	spin_unlock(&wb->lock);
	if (wq_has_sleeper(&wb->copy_wait))
		wake_up_all(&wb->copy_wait);
	if (waiting) {
		queue_work(wb->flush_wq, &wb->flush_work);
		return 0;
	}
	goto done;
unlock:
	spin_unlock(&wb->lock);
done:
	bio->bi_status = errno_to_blk_status(err);
	bio_endio(bio);
	return 0;
}

static void wb_remap_backing(struct wb_device *wb, struct bio *bio,
			     sector_t sector)
{
	struct wb_per_bio *pb = dm_per_bio_data(bio, sizeof(struct wb_per_bio));

	pb->remap = WB_REMAP_BACKING;
	pb->sector = sector;
	pb->op = op_is_write(bio_op(bio)) ?
		 (bio_sectors(bio) ? "write" : "flush") : "read";
	bio_set_dev(bio, wb->backing_dev->bdev);
	bio->bi_iter.bi_sector = sector;
}

/*
 * write_around_mode 1: writes (and flushes) go to the backing device. The
 * lookup holds clean copies only (the mode starts with everything written
 * back and never logs a write), so a copy of the block just leaves it, and
 * a staged read-cache cell of the block is cancelled.
 */
static int wb_write_around(struct wb_device *wb, struct bio *bio,
			   sector_t sector)
{
	struct wb_per_bio *pb = dm_per_bio_data(bio, sizeof(struct wb_per_bio));
	sector_t block = sector & ~(sector_t)(WB_BLOCK_SECTORS - 1);
	unsigned int n = bio_sectors(bio);
	struct wb_metablock *old;

	spin_lock(&wb->lock);
	if (n) {
		old = wb_ht_lookup(wb, block);
		wb_stat_inc(wb, true, !!old,
			    old && wb->cur && wb_mb_seg(wb, old) == wb->cur,
			    n == WB_BLOCK_SECTORS);
		if (old)
			wb_ht_del(wb, old);
		wb_rc_invalidate(wb, block);
	}
	atomic_inc(&wb->nr_wa_inflight);
	spin_unlock(&wb->lock);
	wb_remap_backing(wb, bio, sector);
	pb->remap = WB_REMAP_WRITE_AROUND;
	return DM_MAPIO_REMAPPED;
}

/*
 * A read hit of a block partly on the cache (or in a RAM buffer) and partly
 * on the backing device: synchronous reads of both, merged. Worker only.
 * Called with wb->lock held and mb's copies done; returns unlocked.
 */
static int wb_read_merge(struct wb_device *wb, struct bio *bio,
			 sector_t sector, struct wb_metablock *mb, u8 dirty)
{
	unsigned int off = sector & (WB_BLOCK_SECTORS - 1);
	unsigned int n = bio_sectors(bio), j;
	struct wb_segment *seg = wb_mb_seg(wb, mb);
	sector_t cs = wb_mb_cache_sector(wb, mb);
	const void *src = NULL;
	void *buf = wb->bounce;
	bool from_buf = seg->buf;
	int err;

	if (from_buf) {
		atomic_inc(&seg->nr_buf_readers);
		src = seg->buf + WB_BLOCK_SIZE * (1 + wb_mb_idx(wb, mb));
	} else {
		atomic_inc(&seg->nr_dev_readers);
	}
	spin_unlock(&wb->lock);

	err = wb_sync_io(wb, WB_DEV_BACKING, REQ_OP_READ, sector,
			 buf + (off << WB_SECTOR_SHIFT), n << WB_SECTOR_SHIFT);
	if (!err && !src) {
		err = wb_sync_io(wb, WB_DEV_CACHE, REQ_OP_READ, cs, wb->bounce2,
				 WB_BLOCK_SIZE);
		src = wb->bounce2;
	}
	if (!err)
		for (j = 0; j < WB_BLOCK_SECTORS; j++)
			if (dirty & (1U << j))
				memcpy(buf + (j << WB_SECTOR_SHIFT),
				       src + (j << WB_SECTOR_SHIFT),
				       WB_SECTOR_SIZE);
	if (from_buf)
		wb_unpin_buf(wb, seg);
	else
		wb_unpin_dev(wb, seg);
	if (!err)
		wb_copy_to_bio(bio, buf + (off << WB_SECTOR_SHIFT));
	return err;
}

/*
 * A read of up to one block. A miss is remapped to the backing device; a
 * hit whose sectors are all in the newest copy (dirty or clean) is copied
 * from the RAM buffer (without the lock: the buffer is pinned) or remapped
 * to the copy on the cache device (the slot is pinned until the bio ends, so
 * it cannot be reused meanwhile). A clean copy that lacks some of the
 * sectors is remapped to the backing device, which holds all of them. A
 * dirty hit that also needs sectors of the backing device goes to the
 * worker (in_worker false) or is merged there.
 * Statistics count each bio once, as dm-writeboost does: where it is served.
 * Returns DM_MAPIO_REMAPPED (the caller submits) or DM_MAPIO_SUBMITTED.
 */
static int wb_read(struct wb_device *wb, struct bio *bio, sector_t sector,
		   bool in_worker)
{
	struct wb_per_bio *pb = dm_per_bio_data(bio, sizeof(struct wb_per_bio));
	unsigned int off = sector & (WB_BLOCK_SECTORS - 1);
	unsigned int n = bio_sectors(bio);
	u8 want = wb_bio_bits(off, n), dirty;
	struct wb_metablock *mb;
	struct wb_segment *seg;
	const void *src;
	int err = 0;

	spin_lock(&wb->lock);
retry:
	if (wb_dead(wb)) {
		spin_unlock(&wb->lock);
		err = -EIO;
		goto done;
	}
	mb = wb_ht_lookup(wb, sector & ~(sector_t)(WB_BLOCK_SECTORS - 1));
	if (!mb) {
		/* Partial reads are never cached. */
		bool staged = n == WB_BLOCK_SECTORS &&
			      wb_rc_reserve(wb, pb, sector);

		spin_unlock(&wb->lock);
		wb_stat_inc(wb, false, false, false, n == WB_BLOCK_SECTORS);
		wb_remap_backing(wb, bio, sector);
		if (staged) {
			pb->remap = WB_REMAP_READ_CACHE;
			pb->iter = bio->bi_iter;
		}
		return DM_MAPIO_REMAPPED;
	}
	if (mb->nr_copying) {
		wb_wait_copied(wb, mb);
		goto retry;
	}
	seg = wb_mb_seg(wb, mb);
	dirty = mb->data_bits & want;
	if (dirty != want && mb->dirty && !in_worker) {
		spin_unlock(&wb->lock);
		return DM_MAPIO_KILL;	/* to the worker, which counts it */
	}
	wb_stat_inc(wb, false, true, seg == wb->cur, n == WB_BLOCK_SECTORS);
	if (dirty != want && !mb->dirty) {
		spin_unlock(&wb->lock);
		wb_remap_backing(wb, bio, sector);
		return DM_MAPIO_REMAPPED;
	}
	if (dirty != want) {
		err = wb_read_merge(wb, bio, sector, mb, dirty);
		goto done;
	}
	if (seg->buf) {
		atomic_inc(&seg->nr_buf_readers);
		src = seg->buf + WB_BLOCK_SIZE * (1 + wb_mb_idx(wb, mb));
		spin_unlock(&wb->lock);
		wb_copy_to_bio(bio, src + (off << WB_SECTOR_SHIFT));
		wb_unpin_buf(wb, seg);
		goto done;
	}
	atomic_inc(&seg->nr_dev_readers);
	pb->remap = WB_REMAP_CACHE;
	pb->seg = seg;
	pb->sector = wb_mb_cache_sector(wb, mb) + off;
	spin_unlock(&wb->lock);
	bio_set_dev(bio, wb->cache_dev->bdev);
	bio->bi_iter.bi_sector = pb->sector;
	return DM_MAPIO_REMAPPED;
done:
	bio->bi_status = errno_to_blk_status(err);
	bio_endio(bio);
	return DM_MAPIO_SUBMITTED;
}

static void wb_defer(struct wb_device *wb, struct bio *bio)
{
	spin_lock_irq(&wb->bio_lock);
	bio_list_add(&wb->deferred, bio);
	spin_unlock_irq(&wb->bio_lock);
	queue_work(wb->io_wq, &wb->io_work);
}

/* The bios .map cannot finish without waiting for a read: one at a time. */
static void wb_io_work(struct work_struct *work)
{
	struct wb_device *wb = container_of(work, struct wb_device, io_work);
	struct bio_list bios;
	struct bio *bio;

	spin_lock_irq(&wb->bio_lock);
	bios = wb->deferred;
	bio_list_init(&wb->deferred);
	spin_unlock_irq(&wb->bio_lock);

	while ((bio = bio_list_pop(&bios))) {
		sector_t sector = dm_target_offset(wb->ti, bio->bi_iter.bi_sector);

		if (bio_op(bio) == REQ_OP_WRITE)
			wb_write(wb, bio, sector, true);
		else if (wb_read(wb, bio, sector, true) == DM_MAPIO_REMAPPED)
			dm_submit_bio_remap(bio, NULL);
		cond_resched();
	}
}

/*
 * Bios are handled here, in the submitter's context; see wb_write and
 * wb_read for the few that go to the worker. A dead target fails them.
 */
static int writeboost_map(struct dm_target *ti, struct bio *bio)
{
	struct wb_device *wb = ti->private;
	struct wb_per_bio *pb = dm_per_bio_data(bio, sizeof(struct wb_per_bio));
	sector_t sector = dm_target_offset(ti, bio->bi_iter.bi_sector);
	int r;

	pb->remap = WB_REMAP_NONE;
	if (wb_dead(wb))
		return DM_MAPIO_KILL;

	if (wb->write_around && bio_op(bio) == REQ_OP_WRITE)
		return wb_write_around(wb, bio, sector);
	if (!bio_sectors(bio)) {
		if (bio->bi_opf & REQ_PREFLUSH) {
			wb_flush_bio(wb, bio);
			return DM_MAPIO_SUBMITTED;
		}
		return DM_MAPIO_KILL;
	}
	switch (bio_op(bio)) {
	case REQ_OP_WRITE:
		if (wb_write(wb, bio, sector, false))
			wb_defer(wb, bio);
		return DM_MAPIO_SUBMITTED;
	case REQ_OP_READ:
		r = wb_read(wb, bio, sector, false);
		if (r == DM_MAPIO_KILL) {
			wb_defer(wb, bio);
			return DM_MAPIO_SUBMITTED;
		}
		return r;
	default:
		return DM_MAPIO_KILL;
	}
}

/* Remapped reads: unpin the slot; an error kills the target too. */
static int writeboost_end_io(struct dm_target *ti, struct bio *bio,
			     blk_status_t *error)
{
	struct wb_device *wb = ti->private;
	struct wb_per_bio *pb = dm_per_bio_data(bio, sizeof(struct wb_per_bio));

	if (pb->remap == WB_REMAP_NONE)
		return DM_ENDIO_DONE;
	if (pb->remap == WB_REMAP_CACHE)
		wb_unpin_dev(wb, pb->seg);
	if (pb->remap == WB_REMAP_READ_CACHE)
		wb_rc_read_done(wb, bio, pb, *error != BLK_STS_OK);
	if (pb->remap == WB_REMAP_WRITE_AROUND)
		atomic_dec(&wb->nr_wa_inflight);
	if (*error && *error != BLK_STS_AGAIN && *error != BLK_STS_RESOURCE)
		wb_set_dead(wb, pb->remap == WB_REMAP_CACHE ? WB_DEV_CACHE :
							       WB_DEV_BACKING,
			    pb->remap == WB_REMAP_CACHE ? "read" : pb->op,
			    pb->sector, blk_status_to_errno(*error));
	return DM_ENDIO_DONE;
}

/* ---------------------------------------------------------------------- */
/* Constructor and destructor */

struct wb_tunable_def {
	const char *name;
	struct dm_arg arg;
	unsigned int def;
};

static const struct wb_tunable_def wb_tunables[WB_T_NR] = {
	[WB_T_WRITEBACK_THRESHOLD] = {
		"writeback_threshold",
		{ 0, 100, "writeback_threshold must be 0..100 (percent)" }, 0 },
	[WB_T_NR_MAX_BATCHED_WRITEBACK] = {
		"nr_max_batched_writeback",
		{ 1, WB_MAX_BATCH, "nr_max_batched_writeback must be 1..32" },
		WB_MAX_BATCH },
	[WB_T_UPDATE_SB_RECORD_INTERVAL] = {
		"update_sb_record_interval",
		{ 0, 3600, "update_sb_record_interval must be 0..3600 (seconds)" },
		0 },
	[WB_T_SYNC_DATA_INTERVAL] = {
		"sync_data_interval",
		{ 0, 3600, "sync_data_interval must be 0..3600 (seconds)" }, 0 },
	[WB_T_READ_CACHE_THRESHOLD] = {
		"read_cache_threshold",
		{ 0, 127, "read_cache_threshold must be 0..127" }, 0 },
	[WB_T_WRITE_AROUND_MODE] = {
		"write_around_mode",
		{ 0, 1, "write_around_mode must be 0 or 1" }, 0 },
	[WB_T_NR_READ_CACHE_CELLS] = {
		"nr_read_cache_cells",
		{ 1, 2048, "nr_read_cache_cells must be 1..2048" }, 2048 },
};

/* Fixed at construction, as in dm-writeboost: messages cannot change them. */
static bool wb_tunable_static(int t)
{
	return t == WB_T_WRITE_AROUND_MODE || t == WB_T_NR_READ_CACHE_CELLS;
}

static int wb_tunable_index(const char *key)
{
	int t;

	for (t = 0; t < WB_T_NR; t++)
		if (!strcasecmp(key, wb_tunables[t].name))
			return t;
	return -1;
}

/*
 * Parses "<#optargs> <key> <value> ..." as dm-writeboost 2.2.17 does: keys
 * in any order and any case, a key given twice takes the last value, and
 * words after the counted ones are ignored (logged). The same lines load.
 */
static int wb_parse_optargs(struct wb_device *wb, struct dm_arg_set *as,
			    char **error)
{
	static const struct dm_arg nr_args = {
		0, 2 * WB_T_NR, "Invalid number of optional arguments"
	};
	unsigned int argc, val, i;
	const char *key;
	int t, r;

	if (!as->argc)
		return 0;
	r = dm_read_arg(&nr_args, as, &argc, error);
	if (r)
		return r;
	wb->ctr_count_given = true;
	if (argc % 2 || argc > as->argc) {
		*error = "Optional arguments must be <key> <value> pairs";
		return -EINVAL;
	}
	while (argc) {
		key = dm_shift_arg(as);
		argc -= 2;
		t = wb_tunable_index(key);
		if (t < 0) {
			*error = "Unknown optional argument";
			return -EINVAL;
		}
		r = dm_read_arg(&wb_tunables[t].arg, as, &val, error);
		if (r)
			return r;
		wb->tunable[t] = val;
		for (i = 0; i < wb->nr_ctr_keys && wb->ctr_keys[i] != t; i++)
			;
		if (i == wb->nr_ctr_keys)
			wb->ctr_keys[wb->nr_ctr_keys++] = t;
	}
	if (as->argc)
		DMWARN("%u words after the optional arguments ignored, as dm-writeboost does",
		       as->argc);
	return 0;
}

/* Stops both kthreads; an in-flight writeback batch finishes first. */
static void wb_stop_daemons(struct wb_device *wb)
{
	if (wb->periodic_task)
		kthread_stop(wb->periodic_task);
	wb->periodic_task = NULL;
	if (wb->wb_task)
		kthread_stop(wb->wb_task);
	wb->wb_task = NULL;
}

static int wb_start_daemons(struct wb_device *wb)
{
	struct task_struct *t;

	t = kthread_run(wb_writeback_daemon, wb, "wbkit_writeback");
	if (IS_ERR(t))
		return PTR_ERR(t);
	wb->wb_task = t;
	t = kthread_run(wb_periodic_daemon, wb, "wbkit_periodic");
	if (IS_ERR(t)) {
		wb_stop_daemons(wb);
		return PTR_ERR(t);
	}
	wb->periodic_task = t;
	return 0;
}

/*
 * Never writes to a device: an instance that went live was suspended
 * (postsuspend wrote its RAM buffer out), and one that never did has
 * nothing to write.
 */
static void wb_destroy(struct wb_device *wb)
{
	struct dm_target *ti = wb->ti;
	unsigned int i;

	wb_stop_daemons(wb);
	if (wb->io_wq)
		destroy_workqueue(wb->io_wq);
	if (wb->flush_wq) {
		destroy_workqueue(wb->flush_wq);	/* postsuspend drained it */
		wb->flush_wq = NULL;	/* wb_set_dead must not queue work on it */
	}

	kvfree(wb->wb_entries);
	vfree(wb->rc_data);
	kvfree(wb->rc_hash);
	kvfree(wb->rc_sorted);
	kvfree(wb->rc_cells);
	for (i = 0; i < WB_NR_BUFS; i++)
		vfree(wb->rambuf[i]);
	free_page((unsigned long)wb->bounce);
	free_page((unsigned long)wb->bounce2);
	free_page((unsigned long)wb->zero_block);
	vfree(wb->htable);
	vfree(wb->mbs);
	vfree(wb->segs);
	bioset_exit(&wb->bio_set);
	if (wb->cache_dev)
		dm_put_device(ti, wb->cache_dev);
	if (wb->backing_dev)
		dm_put_device(ti, wb->backing_dev);
	kfree(wb);
}

static int wb_alloc_metadata(struct wb_device *wb)
{
	unsigned long nr_blocks = wb->nr_segments * WB_BLOCKS_PER_SEGMENT;
	unsigned int i;
	u64 k;

	/*
	 * vzalloc, not kvcalloc: kvmalloc refuses more than INT_MAX bytes,
	 * which the metablock array of a cache over ~250 GiB needs.
	 * array_size saturates on overflow, which vzalloc then refuses.
	 * Between one hash bucket per two blocks and one per block: chains
	 * average at most two entries, and the table costs 4 to 8 bytes per
	 * cache block.
	 */
	wb->segs = vzalloc(array_size(wb->nr_segments, sizeof(*wb->segs)));
	wb->mbs = vzalloc(array_size(nr_blocks, sizeof(*wb->mbs)));
	wb->htable_bits = clamp_t(unsigned int,
				  ilog2(nr_blocks), 10, 28);
	wb->htable = vzalloc(array_size(1UL << wb->htable_bits,
					sizeof(*wb->htable)));
	if (!wb->segs || !wb->mbs || !wb->htable)
		return -ENOMEM;
	for (k = 0; k < wb->nr_segments; k++) {
		wb->segs[k].slot = (u32)k;
		wb->segs[k].mb = &wb->mbs[k * WB_BLOCKS_PER_SEGMENT];
		INIT_LIST_HEAD(&wb->segs[k].flush_node);
		INIT_LIST_HEAD(&wb->segs[k].retain_node);
	}
	for (i = 0; i < WB_NR_BUFS; i++) {
		wb->rambuf[i] = vmalloc(WB_SEGMENT_SIZE);
		if (!wb->rambuf[i])
			return -ENOMEM;
		wb->free_rambuf[wb->nr_free_rambuf++] = wb->rambuf[i];
	}
	wb->rc_nr = wb->tunable[WB_T_NR_READ_CACHE_CELLS];
	wb->rc_nr_free = wb->rc_nr;
	atomic_set(&wb->rc_pending, wb->rc_nr);
	wb->rc_last_sector = ~(sector_t)0;
	wb->rc_hash_bits = ilog2(roundup_pow_of_two(wb->rc_nr));
	wb->rc_cells = kvcalloc(wb->rc_nr, sizeof(*wb->rc_cells), GFP_KERNEL);
	wb->rc_sorted = kvcalloc(wb->rc_nr, sizeof(*wb->rc_sorted), GFP_KERNEL);
	wb->rc_hash = kvcalloc(1U << wb->rc_hash_bits, sizeof(*wb->rc_hash),
			       GFP_KERNEL);
	if (!wb->rc_cells || !wb->rc_sorted || !wb->rc_hash)
		return -ENOMEM;
	if (wb->tunable[WB_T_READ_CACHE_THRESHOLD] && wb_rc_alloc_data(wb))
		return -ENOMEM;
	wb->wb_entries = kvcalloc(WB_MAX_BATCH * WB_BLOCKS_PER_SEGMENT,
				  sizeof(*wb->wb_entries), GFP_KERNEL);
	wb->bounce = (void *)__get_free_page(GFP_KERNEL);
	wb->bounce2 = (void *)__get_free_page(GFP_KERNEL);
	wb->zero_block = (void *)get_zeroed_page(GFP_KERNEL);
	if (!wb->wb_entries || !wb->bounce || !wb->bounce2 || !wb->zero_block)
		return -ENOMEM;
	return 0;
}

/*
 * Construct a writeboost target:
 *
 *   <start> <len> writeboost <backing_dev> <cache_dev>
 *       [<#optargs> <key> <value> ...]
 *
 * keys: writeback_threshold (0..100, default 0),
 *       nr_max_batched_writeback (1..32, default 32),
 *       update_sb_record_interval (seconds, 0..3600, default 0),
 *       sync_data_interval (seconds, 0..3600, default 0),
 *       read_cache_threshold (0..127, default 0: no read caching),
 *       write_around_mode (0 or 1, default 0),
 *       nr_read_cache_cells (1..2048, default 2048).
 *
 * The constructor writes nothing and starts nothing: a reload builds its
 * instance while the old one is live. It refuses read-only tables and a
 * cache device that holds neither the magic "WBst" nor a zeroed sector 0.
 * The first preresume formats (zeroed sector 0) or replays.
 */
static int writeboost_ctr(struct dm_target *ti, unsigned int argc, char **argv)
{
	struct dm_arg_set as = { .argc = argc, .argv = argv };
	struct wb_device *wb;
	int t, r;

	bool blank;

	if (argc < 2) {
		ti->error = "Usage: <backing_dev> <cache_dev> [<#optargs> <key> <value> ...]";
		return -EINVAL;
	}
	/* Replay and writeback write both devices, even with no writes above. */
	if (!(dm_table_get_mode(ti->table) & FMODE_WRITE)) {
		ti->error = "Read-only tables are not supported: replay and writeback write";
		return -EROFS;
	}

	wb = kzalloc(sizeof(*wb), GFP_KERNEL);
	if (!wb) {
		ti->error = "Cannot allocate the target context";
		return -ENOMEM;
	}
	ti->private = wb;
	wb->ti = ti;
	spin_lock_init(&wb->lock);
	init_waitqueue_head(&wb->wait);
	init_waitqueue_head(&wb->copy_wait);
	init_waitqueue_head(&wb->commit_wait);
	bio_list_init(&wb->commit_waiters);
	init_waitqueue_head(&wb->wb_wait);
	mutex_init(&wb->wb_batch_lock);
	INIT_LIST_HEAD(&wb->flush_queue);
	INIT_LIST_HEAD(&wb->retained);
	spin_lock_init(&wb->bio_lock);
	bio_list_init(&wb->deferred);
	INIT_WORK(&wb->io_work, wb_io_work);
	INIT_WORK(&wb->flush_work, wb_flush_work);
	INIT_WORK(&wb->rc_work, wb_rc_work);
	atomic_set(&wb->drop_caches, 0);
	for (t = 0; t < WB_STATLEN; t++)
		atomic64_set(&wb->stat[t], 0);
	atomic64_set(&wb->nr_partial_flushed, 0);
	for (t = 0; t < WB_T_NR; t++)
		wb->tunable[t] = wb_tunables[t].def;
	r = bioset_init(&wb->bio_set, BIO_POOL_SIZE,
			offsetof(struct wb_bio, bio), BIOSET_NEED_BVECS);
	if (r) {
		ti->error = "Cannot allocate the bio set";
		kfree(wb);
		ti->private = NULL;
		return r;
	}

	r = dm_get_device(ti, dm_shift_arg(&as), dm_table_get_mode(ti->table),
			  &wb->backing_dev);
	if (r) {
		ti->error = "Cannot open the backing device";
		goto bad;
	}
	r = dm_get_device(ti, dm_shift_arg(&as), dm_table_get_mode(ti->table),
			  &wb->cache_dev);
	if (r) {
		ti->error = "Cannot open the cache device";
		goto bad;
	}
	if (wb->cache_dev->bdev == wb->backing_dev->bdev) {
		ti->error = "The backing and the cache device must differ";
		r = -EINVAL;
		goto bad;
	}
	r = wb_parse_optargs(wb, &as, &ti->error);
	if (r)
		goto bad;
	wb->write_around = wb->tunable[WB_T_WRITE_AROUND_MODE];

	wb->cache_sectors = bdev_nr_sectors(wb->cache_dev->bdev);
	wb->backing_sectors = bdev_nr_sectors(wb->backing_dev->bdev);
	wb->nr_segments = wb_nr_segments(wb->cache_sectors);
	if (!wb->nr_segments) {
		ti->error = "The cache device is smaller than 1.5 MiB (superblock and one segment)";
		r = -EINVAL;
		goto bad;
	}
	if (wb->nr_segments > U32_MAX) {
		ti->error = "The cache device is too large (more than 2^32 segments)";
		r = -EINVAL;
		goto bad;
	}
	if (ti->len > wb->backing_sectors) {
		ti->error = "The target is longer than the backing device";
		r = -EINVAL;
		goto bad;
	}

	r = wb_alloc_metadata(wb);
	if (r) {
		ti->error = "Not enough memory for the metadata of this cache device";
		goto bad;
	}

	/* Only reads: a foreign device is refused before anything is written. */
	r = wb_check_cache_signature(wb, &blank);
	if (r == -EINVAL) {
		ti->error = "The cache device is neither a writeboost cache nor blank (see log)";
		goto bad;
	}
	if (r) {
		ti->error = "Cannot read the superblock of the cache device";
		goto bad;
	}

	wb->io_wq = alloc_ordered_workqueue("wbkit_io", WQ_MEM_RECLAIM);
	/* High priority: flush/FUA bios wait for it (group commit). */
	wb->flush_wq = alloc_ordered_workqueue("wbkit_flush",
					       WQ_MEM_RECLAIM | WQ_HIGHPRI);
	if (!wb->io_wq || !wb->flush_wq) {
		ti->error = "Cannot create the workqueues";
		r = -ENOMEM;
		goto bad;
	}
	/* Suspended until the first resume: no thread, no I/O. */
	set_bit(WB_F_SUSPENDED, &wb->flags);

	r = dm_set_target_max_io_len(ti, WB_BLOCK_SECTORS);
	if (r) {
		ti->error = "Cannot set the maximum I/O size";
		goto bad;
	}
	ti->num_flush_bios = 1;
	ti->flush_supported = true;
	ti->per_io_data_size = sizeof(struct wb_per_bio);
	return 0;

bad:
	wb_destroy(wb);
	ti->private = NULL;
	return r;
}

static void writeboost_dtr(struct dm_target *ti)
{
	wb_destroy(ti->private);
}

/* ---------------------------------------------------------------------- */
/* Suspend and resume */

/*
 * Everything transient reaches the cache device (RAM buffer, then flush),
 * and both kthreads stop: from here to the next preresume this instance
 * does no I/O, so a copy of either device stays valid and a reloaded table
 * can replay the log undisturbed.
 */
static void writeboost_postsuspend(struct dm_target *ti)
{
	struct wb_device *wb = ti->private;

	set_bit(WB_F_SUSPENDED, &wb->flags);
	wake_up_all(&wb->wait);		/* a waiting drop_caches gives up */
	/*
	 * A read-cache injection may wait for writeback: it ends (dropping
	 * its cells, the flag is set) before the threads stop.
	 */
	flush_work(&wb->rc_work);
	wb_stop_daemons(wb);
	if (!test_bit(WB_F_STARTED, &wb->flags))
		return;
	if (wb_wait_flushed(wb, wb_seal_for_flush(wb)))
		return;
	/* Segments go without FUA unless a bio waits: make them durable. */
	wb_flush_dev(wb, WB_DEV_CACHE);
}

/*
 * write_around_mode 1 logs no write, so nothing may be dirty when it goes
 * live: a log replayed with dirty data (a cache that ran in write-back
 * mode) is written back first. dm-writeboost formats the cache in this
 * mode instead, which would lose that data.
 *
 * Then the superblock record is set to last_writeback_id (FUA), before any
 * write goes around the cache. Write-around writes change the backing
 * device without a log entry, so a later replay must not take any dirty
 * entry still in the log for data to write back: without the record, it
 * could infer a lower last_writeback_id (one lap behind) and write old
 * data over theirs.
 */
static int wb_write_around_start(struct wb_device *wb)
{
	u64 id = READ_ONCE(wb->last_flushed_id);
	void *blk;
	int r = 0;

	if (READ_ONCE(wb->last_writeback_id) < id) {
		DMINFO("write_around_mode 1: writing back the replayed log first");
		atomic_inc(&wb->drop_caches);
		wake_up(&wb->wb_wait);
		r = wait_event_killable(wb->wait,
					READ_ONCE(wb->last_writeback_id) >= id ||
					wb_dead(wb));
		atomic_dec(&wb->drop_caches);
	}
	if (!r && wb_dead(wb))
		r = -EIO;
	if (!r && READ_ONCE(wb->last_writeback_id)) {
		blk = (void *)__get_free_page(GFP_KERNEL);
		if (!blk) {
			r = -ENOMEM;
		} else {
			wb_write_sb_record(wb, blk, READ_ONCE(wb->last_writeback_id));
			free_page((unsigned long)blk);
			if (wb_dead(wb))
				r = -EIO;
		}
	}
	if (r)
		DMERR("cannot resume: write_around_mode 1 needs the log written back and recorded first (%d)",
		      r);
	return r;
}

/*
 * The first preresume of an instance formats or replays the cache: only
 * now is the instance about to go live, and the one it replaces (if this
 * is a reload) is suspended and quiet. Every preresume starts the kthreads.
 */
static int writeboost_preresume(struct dm_target *ti)
{
	struct wb_device *wb = ti->private;
	char *error = NULL;
	int r;

	if (!test_bit(WB_F_STARTED, &wb->flags)) {
		r = wb_format_or_replay(wb, &error);
		if (r) {
			DMERR("cannot resume: %s (%d)", error, r);
			return r;
		}
		set_bit(WB_F_STARTED, &wb->flags);
	}
	if (!wb->wb_task) {
		r = wb_start_daemons(wb);
		if (r) {
			DMERR("cannot start the writeback and periodic threads (%d)",
			      r);
			return r;
		}
	}
	if (wb->write_around)
		return wb_write_around_start(wb);
	return 0;
}

static void writeboost_resume(struct dm_target *ti)
{
	struct wb_device *wb = ti->private;

	clear_bit(WB_F_SUSPENDED, &wb->flags);
	wake_up(&wb->wb_wait);
}

/* ---------------------------------------------------------------------- */
/* Messages and status */

/* Writes back everything, waiting interruptibly (killably when suspended). */
static int wb_drop_caches(struct wb_device *wb)
{
	u64 id;
	int r;

	/*
	 * Suspended, the threads are stopped and postsuspend put the RAM
	 * buffer on the cache device: write back here, on request. Debian's
	 * writeboost script stops a cache that way (suspend, drop_caches,
	 * remove, then it zeroes the superblock), as dm-writeboost allows.
	 */
	if (test_bit(WB_F_SUSPENDED, &wb->flags)) {
		r = 0;
		atomic_inc(&wb->drop_caches);
		while (!wb_dead(wb) && READ_ONCE(wb->last_writeback_id) <
				       READ_ONCE(wb->last_flushed_id)) {
			if (fatal_signal_pending(current)) {
				r = -EINTR;
				break;
			}
			wb_writeback_batch(wb);
		}
		atomic_dec(&wb->drop_caches);
		return wb_dead(wb) ? -EIO : r;
	}
	atomic_inc(&wb->drop_caches);
	id = wb_seal_for_flush(wb);
	wake_up(&wb->wb_wait);
	r = wait_event_interruptible(wb->wait,
				     READ_ONCE(wb->last_writeback_id) >= id ||
				     wb_dead(wb) ||
				     test_bit(WB_F_SUSPENDED, &wb->flags));
	atomic_dec(&wb->drop_caches);
	if (r)
		return r;
	if (wb_dead(wb))
		return -EIO;
	return READ_ONCE(wb->last_writeback_id) >= id ? 0 : -EBUSY;
}

/*
 * dmsetup message <dev> 0 <key> <value>     (the tunables of the table line)
 * dmsetup message <dev> 0 drop_caches       (write back everything, wait)
 * dmsetup message <dev> 0 clear_stat
 */
static int writeboost_message(struct dm_target *ti, unsigned int argc,
			      char **argv, char *result, unsigned int maxlen)
{
	struct wb_device *wb = ti->private;
	unsigned int val;
	int t;

	if (argc == 1 && !strcasecmp(argv[0], "drop_caches"))
		return wb_drop_caches(wb);
	if (argc == 1 && !strcasecmp(argv[0], "clear_stat")) {
		for (t = 0; t < WB_STATLEN; t++)
			atomic64_set(&wb->stat[t], 0);
		atomic64_set(&wb->nr_partial_flushed, 0);
		return 0;
	}
	if (argc != 2) {
		DMWARN("unknown message: use <key> <value>, drop_caches or clear_stat");
		return -EINVAL;
	}
	t = wb_tunable_index(argv[0]);
	if (t < 0) {
		DMWARN("unknown message key %s", argv[0]);
		return -EINVAL;
	}
	if (wb_tunable_static(t)) {
		DMWARN("%s is fixed at construction: reload the table to change it",
		       wb_tunables[t].name);
		return -EINVAL;
	}
	if (kstrtouint(argv[1], 10, &val) || val < wb_tunables[t].arg.min ||
	    val > wb_tunables[t].arg.max) {
		DMWARN("%s", wb_tunables[t].arg.error);
		return -EINVAL;
	}
	if (t == WB_T_READ_CACHE_THRESHOLD && val && wb_rc_alloc_data(wb)) {
		DMWARN("no memory for the read cache cells");
		return -ENOMEM;
	}
	WRITE_ONCE(wb->tunable[t], val);
	wake_up(&wb->wb_wait);
	return 0;
}

/*
 * Status (STATUSTYPE_INFO), dm-writeboost's layout:
 *
 *   <cursor_pos> <nr_cache_blocks> <nr_segments> <current_id>
 *   <last_flushed_id> <last_writeback_id> <nr_dirty_cache_blocks>
 *   <stat * 16> <nr_partial_flushed>
 *   12 writeback_threshold <n> nr_cur_batched_writeback <n>
 *      sync_data_interval <n> update_sb_record_interval <n>
 *      read_cache_threshold <n> dead <cause>
 *
 * The dead state is one more counted key/value pair (upstream has 10
 * tokens there), so a parser that trusts the count reads every token.
 * stat index = write << 3 | hit << 2 | on_buffer << 1 | fullsize.
 * cause is "-" while alive, else <cache|backing>:<read|write|flush>:
 * <sector>:<errno>, e.g. "cache:write:5120:-5".
 */
static void writeboost_status(struct dm_target *ti, status_type_t type,
			      unsigned int status_flags, char *result,
			      unsigned int maxlen)
{
	struct wb_device *wb = ti->private;
	struct wb_segment *cur = READ_ONCE(wb->cur);
	unsigned int sz = 0, i;
	u64 cursor, cur_id;

	switch (type) {
	case STATUSTYPE_INFO:
		cur_id = cur ? cur->id : READ_ONCE(wb->last_sealed_id) + 1;
		cursor = (u64)wb_id_to_slot(wb, cur_id) * WB_BLOCKS_PER_SEGMENT +
			 (cur ? cur->length : 0);
		DMEMIT("%llu %llu %llu %llu %llu %llu %llu",
		       (unsigned long long)cursor,
		       (unsigned long long)wb->nr_segments * WB_BLOCKS_PER_SEGMENT,
		       (unsigned long long)wb->nr_segments,
		       (unsigned long long)cur_id,
		       (unsigned long long)READ_ONCE(wb->last_flushed_id),
		       (unsigned long long)READ_ONCE(wb->last_writeback_id),
		       (unsigned long long)READ_ONCE(wb->nr_dirty));
		for (i = 0; i < WB_STATLEN; i++)
			DMEMIT(" %lld", (long long)atomic64_read(&wb->stat[i]));
		DMEMIT(" %lld", (long long)atomic64_read(&wb->nr_partial_flushed));
		DMEMIT(" 12 writeback_threshold %u nr_cur_batched_writeback %u sync_data_interval %u update_sb_record_interval %u read_cache_threshold %u",
		       READ_ONCE(wb->tunable[WB_T_WRITEBACK_THRESHOLD]),
		       READ_ONCE(wb->nr_cur_batched),
		       READ_ONCE(wb->tunable[WB_T_SYNC_DATA_INTERVAL]),
		       READ_ONCE(wb->tunable[WB_T_UPDATE_SB_RECORD_INTERVAL]),
		       READ_ONCE(wb->tunable[WB_T_READ_CACHE_THRESHOLD]));
		if (!wb_dead(wb)) {
			DMEMIT(" dead -");
		} else {
			smp_rmb();	/* pairs with wb_set_dead: cause before flag */
			DMEMIT(" dead %s:%s:%llu:%d",
			       wb->cause.dev == WB_DEV_CACHE ? "cache" : "backing",
			       wb->cause.op, (unsigned long long)wb->cause.sector,
			       wb->cause.err);
		}
		break;

	case STATUSTYPE_TABLE:
		DMEMIT("%s %s", wb->backing_dev->name, wb->cache_dev->name);
		if (!wb->ctr_count_given)
			break;
		DMEMIT(" %u", 2 * wb->nr_ctr_keys);
		for (i = 0; i < wb->nr_ctr_keys; i++)
			DMEMIT(" %s %u", wb_tunables[wb->ctr_keys[i]].name,
			       READ_ONCE(wb->tunable[wb->ctr_keys[i]]));
		break;

	case STATUSTYPE_IMA:
		*result = '\0';
		break;
	}
}

static int writeboost_iterate_devices(struct dm_target *ti,
				      iterate_devices_callout_fn fn, void *data)
{
	struct wb_device *wb = ti->private;
	int r;

	r = fn(ti, wb->backing_dev, 0, ti->len, data);
	if (!r)
		r = fn(ti, wb->cache_dev, 0, wb->cache_sectors, data);
	return r;
}

static void writeboost_io_hints(struct dm_target *ti,
				struct queue_limits *limits)
{
	/* Whole cache blocks are the cheap case: no merge with older data. */
	blk_limits_io_opt(limits, WB_BLOCK_SIZE);
}

/*
 * Another name lets this module load next to upstream's dm-writeboost, which
 * registers "writeboost" too: both targets side by side in one boot, for a
 * comparison (bench/vm-fastpath.sh) or a migration test.
 */
static char *target_name = "writeboost";
module_param(target_name, charp, 0444);
MODULE_PARM_DESC(target_name,
		 "device-mapper target type to register (default writeboost)");

static struct target_type writeboost_target = {
	/* The project's version, so `dmsetup targets` tells this module from upstream's. */
	.version = { WBKIT_VERSION_MAJOR, WBKIT_VERSION_MINOR, WBKIT_VERSION_PATCH },
	.module = THIS_MODULE,
	.ctr = writeboost_ctr,
	.dtr = writeboost_dtr,
	.map = writeboost_map,
	.end_io = writeboost_end_io,
	.postsuspend = writeboost_postsuspend,
	.preresume = writeboost_preresume,
	.resume = writeboost_resume,
	.message = writeboost_message,
	.status = writeboost_status,
	.iterate_devices = writeboost_iterate_devices,
	.io_hints = writeboost_io_hints,
};

static int __init dm_wbkit_init(void)
{
	int r;

	if (!target_name || !*target_name || strlen(target_name) >= 32) {
		DMERR("target_name must be 1 to 31 characters");
		return -EINVAL;
	}
	writeboost_target.name = target_name;
	r = dm_register_target(&writeboost_target);
	if (r)
		DMERR("cannot register the %s target (%d): is dm-writeboost loaded? Load this module with target_name=<another name> to run both",
		      target_name, r);
	return r;
}

static void __exit dm_wbkit_exit(void)
{
	dm_unregister_target(&writeboost_target);
}

module_init(dm_wbkit_init);
module_exit(dm_wbkit_exit);

MODULE_AUTHOR("wbkit");
MODULE_DESCRIPTION(DM_NAME " write-back cache target (dm-writeboost 2.2 on-disk format)");
MODULE_LICENSE("GPL");
MODULE_SOFTDEP("pre: crc32c");
MODULE_VERSION(WBKIT_VERSION);
/* dm core autoloads a target type with request_module("dm-<name>"). */
MODULE_ALIAS("dm-writeboost");
