// SPDX-License-Identifier: GPL-2.0
/*
 * dm-wbkit-io.c - the bio path: .map and .end_io, reads, writes,
 * partial-write merges and the deferred worker.
 */
#include <linux/bio.h>

#include "dm-wbkit.h"

#define DM_MSG_PREFIX "writeboost"

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

/*
 * Waits (lock dropped) until no write is copying into mb's block. The
 * count stays where it is: the buffer cannot go while writes copy into it.
 */
static void wb_wait_copied(struct wb_device *wb, struct wb_metablock *mb)
{
	unsigned int *copying = wb_copying(wb, mb);

	spin_unlock(&wb->lock);
	wait_event(wb->copy_wait, !READ_ONCE(*copying));
	spin_lock(&wb->lock);
}

/*
 * The same for a read. Overwrites in place that start meanwhile wait for it
 * (seg->nr_read_waiters): otherwise a stream of them, each starting before
 * the last one is done, could keep the count above 0 for ever.
 */
static void wb_read_wait_copied(struct wb_device *wb, struct wb_metablock *mb)
{
	struct wb_segment *seg = wb_mb_seg(wb, mb);

	seg->nr_read_waiters++;
	wb_wait_copied(wb, mb);
	if (!--seg->nr_read_waiters)
		wake_up_all(&wb->copy_wait);
}

/* ---------------------------------------------------------------------- */
/* Bio path */

/* An empty flush: everything completed so far, durable on the cache device. */
static void wb_flush_bio(struct wb_device *wb, struct bio *bio)
{
	bool waiting = false;
	int err = 0;

	spin_lock(&wb->lock);
	if (wb_dead(wb)) {
		err = -EIO;
	} else {
		bool open = wb->cur && wb->cur->length;

		waiting = wb_add_commit_waiter(wb, bio,
					       open ? wb->cur->id : wb->last_sealed_id,
					       open ? wb->cur->length : WB_COMMIT_WHOLE);
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
 * to the worker (in_worker false: WB_MAP_DEFER), which reads it. REQ_PREFLUSH
 * and REQ_FUA bios complete once their segment is durable (group commit,
 * wb_flush_work); every other write completes here.
 */
static enum wb_map_result wb_write(struct wb_device *wb, struct bio *bio,
				   sector_t sector, bool in_worker)
{
	sector_t block = sector & ~(sector_t)(WB_BLOCK_SECTORS - 1);
	unsigned int off = sector & (WB_BLOCK_SECTORS - 1);
	unsigned int n = bio_sectors(bio);
	u8 bits = wb_bio_bits(off, n);
	bool commit = bio->bi_opf & (REQ_PREFLUSH | REQ_FUA);
	struct wb_metablock *merged = NULL, *old, *mb;
	struct wb_metablock_device *md;
	unsigned int *copying;
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
	/* A block a commit took is on the slot, under its checksum: kept. */
	on_buffer = old && wb_mb_seg(wb, old) == seg &&
		    wb_mb_idx(wb, old) >= seg->frozen;
	/*
	 * A full segment stays open until a write needs a new block, as in
	 * dm-writeboost: overwrites of its blocks still land in place and
	 * count as on_buffer.
	 */
	if (!on_buffer && seg->length == WB_BLOCKS_PER_SEGMENT) {
		wb_seal(wb);
		goto retry;
	}

	if (on_buffer && seg->nr_read_waiters) {
		spin_unlock(&wb->lock);
		wait_event(wb->copy_wait, !READ_ONCE(seg->nr_read_waiters));
		spin_lock(&wb->lock);
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
			if (wb_nr_copying(wb, old)) {
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
				return WB_MAP_DEFER;
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
		wb_mb_set_sector(mb, block);
		mb->data_bits = bits | keep;
		mb->dirty = true;
		mb->obsolete = false;
		mb->discarded = false;
		wb_ht_add(wb, mb);
		seg->length++;
	}
	wb_rc_invalidate(wb, block);
	wb_stat_inc(wb, true, !!old, on_buffer, n == WB_BLOCK_SECTORS);
	WRITE_ONCE(wb->last_write_jiffies, jiffies);

	md = seg->buf + WB_METABLOCK_OFFSET(wb_mb_idx(wb, mb));
	md->sector = cpu_to_le64(block);
	md->dirty_bits = mb->data_bits;
	/* The buffer, and so the count, stays while this write copies. */
	copying = wb_copying(wb, mb);
	(*copying)++;
	seg->nr_writers++;
	spin_unlock(&wb->lock);

	wb_copy_from_bio(dst + (off << WB_SECTOR_SHIFT), bio);

	spin_lock(&wb->lock);
	(*copying)--;
	seg->nr_writers--;
	/* Only now: the flusher may complete the bio as soon as it is listed. */
	if (commit && !wb_dead(wb))
		waiting = wb_add_commit_waiter(wb, bio, seg->id,
					       wb_mb_idx(wb, mb) + 1);
	err = commit && wb_dead(wb) ? -EIO : 0;
	spin_unlock(&wb->lock);
	if (wq_has_sleeper(&wb->copy_wait))
		wake_up_all(&wb->copy_wait);
	if (waiting) {
		queue_work(wb->flush_wq, &wb->flush_work);
		return WB_MAP_SUBMITTED;
	}
	goto done;
unlock:
	spin_unlock(&wb->lock);
done:
	bio->bi_status = errno_to_blk_status(err);
	bio_endio(bio);
	return WB_MAP_SUBMITTED;
}

static void wb_remap_backing(struct wb_device *wb, struct bio *bio,
			     sector_t sector)
{
	struct wb_per_bio *pb = dm_per_bio_data(bio, sizeof(struct wb_per_bio));

	pb->remap = WB_REMAP_BACKING;
	pb->sector = sector;
	pb->op = op_is_write(bio_op(bio)) ?
		 (bio_sectors(bio) ? WB_OP_WRITE : WB_OP_FLUSH) : WB_OP_READ;
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
	bool from_buf = false, from_dev = false;
	int err;

	if (seg == wb->cur) {
		/* Overwritten in place (see wb_read): a snapshot under the lock. */
		memcpy(wb->bounce2, seg->buf + WB_BLOCK_SIZE * (1 + wb_mb_idx(wb, mb)),
		       WB_BLOCK_SIZE);
		src = wb->bounce2;
	} else if (seg->buf) {
		from_buf = true;
		atomic_inc(&seg->nr_buf_readers);
		src = seg->buf + WB_BLOCK_SIZE * (1 + wb_mb_idx(wb, mb));
	} else {
		from_dev = true;
		atomic_inc(&seg->nr_dev_readers);
	}
	spin_unlock(&wb->lock);

	/* Sectors the cache does not hold: an error fails this bio alone. */
	err = wb_sync_io_nofail(wb, WB_DEV_BACKING, REQ_OP_READ, sector,
				buf + (off << WB_SECTOR_SHIFT),
				n << WB_SECTOR_SHIFT);
	if (err && !wb_dead(wb))
		wb_fail_request(wb, WB_OP_READ, sector, err);
	/* Dirty sectors: an error puts them at risk and kills. */
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
	if (from_dev)
		wb_unpin_dev(wb, seg);
	if (!err)
		wb_copy_to_bio(bio, buf + (off << WB_SECTOR_SHIFT));
	return err;
}

/*
 * A read of up to one block. A miss is remapped to the backing device; a
 * hit whose sectors are all in the newest copy (dirty or clean) is copied
 * from the RAM buffer (the open segment's under the lock, a sealed one's
 * pinned, without it) or remapped
 * to the copy on the cache device (the slot is pinned until the bio ends, so
 * it cannot be reused meanwhile). A clean copy that lacks some of the
 * sectors is remapped to the backing device, which holds all of them. A
 * dirty hit that also needs sectors of the backing device goes to the
 * worker (in_worker false) or is merged there.
 * Statistics count each bio once, as dm-writeboost does: where it is served.
 * Returns WB_MAP_REMAPPED (the caller submits), WB_MAP_SUBMITTED or
 * WB_MAP_DEFER.
 */
static enum wb_map_result wb_read(struct wb_device *wb, struct bio *bio,
				  sector_t sector, bool in_worker)
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
		return WB_MAP_REMAPPED;
	}
	if (wb_nr_copying(wb, mb)) {
		wb_read_wait_copied(wb, mb);
		goto retry;
	}
	seg = wb_mb_seg(wb, mb);
	dirty = mb->data_bits & want;
	if (dirty != want && mb->dirty && !in_worker) {
		spin_unlock(&wb->lock);
		return WB_MAP_DEFER;	/* the worker counts it */
	}
	wb_stat_inc(wb, false, true, seg == wb->cur, n == WB_BLOCK_SECTORS);
	if (dirty != want && !mb->dirty) {
		spin_unlock(&wb->lock);
		wb_remap_backing(wb, bio, sector);
		return WB_MAP_REMAPPED;
	}
	if (dirty != want) {
		err = wb_read_merge(wb, bio, sector, mb, dirty);
		goto done;
	}
	if (seg->buf) {
		src = seg->buf + WB_BLOCK_SIZE * (1 + wb_mb_idx(wb, mb));
		/*
		 * The open segment's blocks are overwritten in place by writes
		 * that copy without the lock once they have counted themselves
		 * in wb_copying (0 here): copied under the lock, no such
		 * write can start halfway through and leave a sector half old,
		 * half new. A sealed segment's buffer no longer changes; pinned,
		 * it is copied without the lock.
		 */
		if (seg == wb->cur) {
			wb_copy_to_bio(bio, src + (off << WB_SECTOR_SHIFT));
			spin_unlock(&wb->lock);
			goto done;
		}
		atomic_inc(&seg->nr_buf_readers);
		spin_unlock(&wb->lock);
		wb_copy_to_bio(bio, src + (off << WB_SECTOR_SHIFT));
		wb_unpin_buf(wb, seg);
		goto done;
	}
	atomic_inc(&seg->nr_dev_readers);
	pb->remap = WB_REMAP_CACHE;
	pb->seg = seg;
	pb->sector = wb_mb_cache_sector(wb, mb) + off;
	pb->mb = mb;
	pb->clean = !mb->dirty;
	pb->backing_sector = sector;
	spin_unlock(&wb->lock);
	bio_set_dev(bio, wb->cache_dev->bdev);
	bio->bi_iter.bi_sector = pb->sector;
	pb->iter = bio->bi_iter;
	return WB_MAP_REMAPPED;
done:
	bio->bi_status = errno_to_blk_status(err);
	bio_endio(bio);
	return WB_MAP_SUBMITTED;
}

/*
 * Places a tombstone for block (hashed as old) in the open segment: a
 * clean entry with zeroed data, which supersedes every older copy of the
 * block in the log (docs/FORMAT.md, replay step 3) and, in a segment the
 * trust record does not cover, serves nothing after a restart either. The
 * block itself leaves the lookup, so reads go to the backing device. Called
 * with wb->lock held, the open segment not full and not trusted.
 */
static void wb_place_tombstone(struct wb_device *wb, struct wb_metablock *old,
			       sector_t block)
{
	struct wb_segment *seg = wb->cur;
	unsigned int idx = seg->length;
	struct wb_metablock *mb = &seg->mb[idx];
	struct wb_metablock_device *md = seg->buf + WB_METABLOCK_OFFSET(idx);

	/* Zeros, not the deleted data: upstream's replay serves it as a copy. */
	memset(seg->buf + WB_BLOCK_SIZE * (1 + idx), 0, WB_BLOCK_SIZE);
	if (old->dirty) {
		old->discarded = true;
		atomic64_inc(&wb->nr_discarded_dirty);
	}
	wb_ht_del(wb, old);
	wb_mb_set_sector(mb, block);
	mb->data_bits = 0;
	mb->dirty = false;
	mb->obsolete = false;
	mb->discarded = false;
	md->sector = cpu_to_le64(block);
	md->dirty_bits = 0;
	seg->length++;
	wb->last_tombstone_id = seg->id;
	atomic64_inc(&wb->nr_discarded_blocks);
}

/*
 * Flags every dirty copy of [start, end) as discarded: the newest ones (in
 * the lookup) and the older ones newer writes had superseded, which
 * writeback still holds to write (their newer copy may not have been
 * durable): the block would read that older data from the backing device
 * after its discard. All of them lie in the segments not written back, up
 * to the open one: one pass over those, made only when the lookup holds a
 * dirty copy in the range. Called with batch_lock held: no batch takes
 * copies meanwhile.
 */
static void wb_flag_discarded(struct wb_device *wb, sector_t start,
			      sector_t end)
{
	bool any = false;
	sector_t block;
	u64 id, open_id;

	for (block = start; block < end && !any; block += WB_BLOCK_SECTORS) {
		struct wb_metablock *mb;

		spin_lock(&wb->lock);
		mb = wb_ht_lookup(wb, block);
		any = mb && mb->dirty;
		spin_unlock(&wb->lock);
		if (!((block >> 3) & 1023))
			cond_resched();
	}
	/* Only a dirty copy in the lookup can have older dirty ones behind it. */
	if (!any)
		return;
	spin_lock(&wb->lock);
	open_id = wb->cur ? wb->cur->id : wb->last_sealed_id;
	spin_unlock(&wb->lock);
	for (id = READ_ONCE(wb->last_writeback_id) + 1; id <= open_id; id++) {
		struct wb_segment *seg = wb_seg_of_id(wb, id);
		unsigned int j;

		spin_lock(&wb->lock);
		for (j = 0; seg->id == id && j < seg->length; j++) {
			struct wb_metablock *mb = &seg->mb[j];

			block = wb_mb_sector(mb);
			if (mb->dirty && block >= start && block < end)
				mb->discarded = true;
		}
		spin_unlock(&wb->lock);
		if (!(id & 63))
			cond_resched();
	}
}

/*
 * REQ_OP_DISCARD, in the worker. Only whole 4 KiB blocks are discarded:
 * the sectors of a partial block at either end keep their data, in the
 * cache and on the backing device. In this order (kmod/README.md,
 * "Discard"):
 * 1. before the backing device may change under older clean copies, the
 *    trust record is raised past the open segment (FUA);
 * 2. the batch in progress ends (it may be writing copies of the range),
 *    and until step 3 no other batch runs;
 * 3. the range goes on to the backing device when that supports discard,
 *    and the backing device is flushed: a tombstone durable before the
 *    discard there would leave the block to older data at a power cut;
 *    then every dirty copy of the range is flagged (wb_flag_discarded):
 *    writeback skips them from then on after a passdown, without one once
 *    the tombstones are on the cache device;
 * 4. every cached copy of a block in the range (dirty or clean, in a RAM
 *    buffer or on the cache device) gets a tombstone (wb_place_tombstone),
 *    in a segment the trust record does not cover (raised again when the
 *    tombstones reach it). The block reads from the backing device from
 *    now on, after a reload or a restart too; a tombstone not yet durable
 *    at a power cut leaves the block's pre-discard content.
 * A failed passdown fails the bio with the cached copies left as they were.
 */
static void wb_discard(struct wb_device *wb, struct bio *bio, sector_t sector)
{
	sector_t start = round_up(sector, WB_BLOCK_SECTORS);
	sector_t end = round_down(sector + bio_sectors(bio), WB_BLOCK_SECTORS);
	struct block_device *backing = wb->backing_dev->bdev;
	bool passdown = bdev_max_discard_sectors(backing) > 0;
	sector_t block;
	u64 open_id;
	int err = 0;

	if (start >= end)
		goto done;
	mutex_lock(&wb->discard_lock);
	spin_lock(&wb->lock);
	open_id = wb->cur ? wb->cur->id : wb->last_sealed_id + 1;
	spin_unlock(&wb->lock);
	if (passdown && !wb->write_around &&
	    wb_clean_copy_trusted(open_id, wb->trusted_from_id)) {
		err = wb_write_trust(wb, open_id + 1);
		if (err)
			goto unlock;
	}
	/*
	 * No batch runs from here to the flags: the one in progress, which
	 * may hold copies of the range, has written them before the passdown
	 * removes them, and the next one skips them.
	 */
	wb_lock_batch(wb, false);
	if (passdown) {
		err = blkdev_issue_discard(backing, start, end - start, GFP_NOIO);
		if (err) {
			wb_unlock_batch(wb);
			if (!wb_dead(wb))
				wb_fail_request(wb, WB_OP_WRITE, start, err);
			goto unlock;
		}
		err = wb_flush_dev(wb, WB_DEV_BACKING);
		if (err) {
			wb_unlock_batch(wb);
			goto unlock;
		}
	}
	if (!wb->write_around) {
		spin_lock(&wb->lock);
		wb->discard_passdown = passdown;
		wb->tombstones_pending = !passdown;
		spin_unlock(&wb->lock);
		wb_flag_discarded(wb, start, end);
	}
	wb_unlock_batch(wb);
	for (block = start; block < end; block += WB_BLOCK_SECTORS) {
		struct wb_metablock *old;
		u64 need;

		spin_lock(&wb->lock);
retry:
		old = wb_ht_lookup(wb, block);
		wb_rc_invalidate(wb, block);
		if (!old) {
			spin_unlock(&wb->lock);
			goto next;
		}
		/*
		 * write_around_mode logs nothing and trusts no copy: the
		 * copy just leaves the lookup, as a write around does.
		 */
		if (wb->write_around) {
			wb_ht_del(wb, old);
			atomic64_inc(&wb->nr_discarded_blocks);
			spin_unlock(&wb->lock);
			goto next;
		}
		/* A copy still being written into: the tombstone goes after it. */
		if (wb_nr_copying(wb, old)) {
			wb_wait_copied(wb, old);
			goto retry;
		}
		err = wb_get_cur(wb);
		if (err) {
			spin_unlock(&wb->lock);
			goto unlock;
		}
		/*
		 * wb_get_cur drops the lock while it waits for a slot or a
		 * buffer: a write may have replaced the copy meanwhile.
		 */
		if (wb_ht_lookup(wb, block) != old)
			goto retry;
		if (wb->cur->length == WB_BLOCKS_PER_SEGMENT) {
			wb_seal(wb);
			goto retry;
		}
		if (wb_clean_copy_trusted(wb->cur->id, wb->trusted_from_id)) {
			/* Room for the rest of the range, so one write covers it. */
			need = wb->cur->id + 2 +
			       div_u64(end - block, WB_BLOCK_SECTORS * WB_BLOCKS_PER_SEGMENT);
			spin_unlock(&wb->lock);
			err = wb_write_trust(wb, need);
			if (err)
				goto unlock;
			spin_lock(&wb->lock);
			goto retry;
		}
		wb_place_tombstone(wb, old, block);
		spin_unlock(&wb->lock);
next:
		if (!((block >> 3) & 1023))
			cond_resched();
	}
unlock:
	spin_lock(&wb->lock);
	wb->tombstones_pending = false;
	spin_unlock(&wb->lock);
	mutex_unlock(&wb->discard_lock);
	if (err == -EOPNOTSUPP)
		err = -EIO;
done:
	if (!err && wb_dead(wb))
		err = -EIO;
	bio->bi_status = errno_to_blk_status(err);
	bio_endio(bio);
}

static void wb_defer(struct wb_device *wb, struct bio *bio)
{
	spin_lock_irq(&wb->bio_lock);
	bio_list_add(&wb->deferred, bio);
	spin_unlock_irq(&wb->bio_lock);
	queue_work(wb->io_wq, &wb->io_work);
}

/*
 * A read of a clean copy that failed on the cache device: the backing
 * device holds the same data (the copy was written back, or read from
 * there into the read cache), so the bio is served from it, and the copy
 * leaves the lookup so that later reads go there too. The slot stays
 * pinned until the copy is out, so pb->mb is still the copy the bio read.
 * A write of the block since then may have replaced the copy; the read
 * raced with that write and may return either.
 */
static void wb_fallback(struct wb_device *wb, struct bio *bio)
{
	struct wb_per_bio *pb = dm_per_bio_data(bio, sizeof(struct wb_per_bio));
	struct wb_metablock *mb = pb->mb;
	unsigned int off = pb->backing_sector & (WB_BLOCK_SECTORS - 1);
	unsigned int n;
	int err;

	spin_lock(&wb->lock);
	if (wb_mb_hashed(mb) && !mb->dirty &&
	    wb_mb_sector(mb) == pb->backing_sector - off)
		wb_ht_del(wb, mb);
	spin_unlock(&wb->lock);
	wb_unpin_dev(wb, pb->seg);

	bio->bi_iter = pb->iter;
	n = bio_sectors(bio);
	err = wb_sync_io_nofail(wb, WB_DEV_BACKING, REQ_OP_READ,
				pb->backing_sector, wb->fallback_bounce,
				n << WB_SECTOR_SHIFT);
	if (!err) {
		wb_copy_to_bio(bio, wb->fallback_bounce);
		atomic64_inc(&wb->nr_errors[WB_ERR_CACHE_READ_FALLBACK]);
	} else if (!wb_dead(wb)) {
		wb_fail_request(wb, WB_OP_READ, pb->backing_sector, err);
	}
	/* Completes the clone again; .end_io has nothing left to do. */
	pb->remap = WB_REMAP_NONE;
	bio->bi_status = errno_to_blk_status(err);
	bio_endio(bio);
}

/*
 * Clean-copy reads to serve again from the backing device. Each one holds
 * its slot's pin until wb_fallback drops it, and it waits for nothing but
 * its backing read: never for io_wq, the flusher or a slot (see
 * wb->fallback_wq).
 */
void wb_fallback_work(struct work_struct *work)
{
	struct wb_device *wb = container_of(work, struct wb_device,
					    fallback_work);
	struct bio_list fallback;
	struct bio *bio;

	spin_lock_irq(&wb->bio_lock);
	fallback = wb->fallback;
	bio_list_init(&wb->fallback);
	spin_unlock_irq(&wb->bio_lock);

	while ((bio = bio_list_pop(&fallback))) {
		wb_fallback(wb, bio);
		cond_resched();
	}
}

/* The bios .map cannot finish without waiting for a read: one at a time. */
void wb_io_work(struct work_struct *work)
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

		if (bio_op(bio) == REQ_OP_DISCARD)
			wb_discard(wb, bio, sector);
		else if (bio_op(bio) == REQ_OP_WRITE)
			wb_write(wb, bio, sector, true);
		else if (wb_read(wb, bio, sector, true) == WB_MAP_REMAPPED)
			dm_submit_bio_remap(bio, NULL);
		cond_resched();
	}
}

/*
 * Bios are handled here, in the submitter's context; see wb_write and
 * wb_read for the few that go to the worker. A dead target fails them.
 */
int writeboost_map(struct dm_target *ti, struct bio *bio)
{
	struct wb_device *wb = ti->private;
	struct wb_per_bio *pb = dm_per_bio_data(bio, sizeof(struct wb_per_bio));
	sector_t sector = dm_target_offset(ti, bio->bi_iter.bi_sector);
	enum wb_map_result r;

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
		r = wb_write(wb, bio, sector, false);
		break;
	case REQ_OP_READ:
		r = wb_read(wb, bio, sector, false);
		break;
	case REQ_OP_DISCARD:
		r = WB_MAP_DEFER;	/* it may wait for a slot or a trust write */
		break;
	default:
		return DM_MAPIO_KILL;
	}
	if (r == WB_MAP_REMAPPED)
		return DM_MAPIO_REMAPPED;
	if (r == WB_MAP_DEFER)
		wb_defer(wb, bio);
	return DM_MAPIO_SUBMITTED;
}

/*
 * Remapped bios: unpin the slot, and the fault table (kmod/README.md) for
 * an error. Only a read of dirty data from the cache device puts what the
 * cache holds at risk and kills; a read of data the cache does not hold
 * (a miss, a read-cache staging read) and a write around the cache fail
 * the bio alone, and a clean copy that the cache device cannot read is
 * read from the backing device (wb_fallback, DM_ENDIO_INCOMPLETE as
 * dm-raid1 does for a read to retry on another leg).
 */
int writeboost_end_io(struct dm_target *ti, struct bio *bio,
		      blk_status_t *error)
{
	struct wb_device *wb = ti->private;
	struct wb_per_bio *pb = dm_per_bio_data(bio, sizeof(struct wb_per_bio));
	int err = blk_status_to_errno(*error);
	unsigned long flags;

	if (pb->remap == WB_REMAP_NONE)
		return DM_ENDIO_DONE;
	if (pb->remap == WB_REMAP_READ_CACHE)
		wb_rc_read_done(wb, bio, pb, *error != BLK_STS_OK);
	if (pb->remap == WB_REMAP_WRITE_AROUND)
		atomic_dec(&wb->nr_wa_inflight);
	if (err && wb_err_transient(err)) {
		atomic64_inc(&wb->nr_errors[WB_ERR_TRANSIENT]);
	} else if (err && pb->remap == WB_REMAP_CACHE && pb->clean &&
		   !wb_dead(wb)) {
		wb_count_error(wb, WB_DEV_CACHE, WB_OP_READ);
		DMERR_LIMIT("cache device read error %d at sector %llu: a clean copy, read from the backing device instead",
			    err, (unsigned long long)pb->sector);
		spin_lock_irqsave(&wb->bio_lock, flags);
		bio_list_add(&wb->fallback, bio);
		spin_unlock_irqrestore(&wb->bio_lock, flags);
		queue_work(wb->fallback_wq, &wb->fallback_work);
		return DM_ENDIO_INCOMPLETE;	/* wb_fallback unpins */
	} else if (err && pb->remap == WB_REMAP_CACHE) {
		wb_set_dead(wb, WB_DEV_CACHE, WB_OP_READ, pb->sector, err);
	} else if (err) {
		wb_fail_request(wb, pb->op, pb->sector, err);
	}
	if (pb->remap == WB_REMAP_CACHE)
		wb_unpin_dev(wb, pb->seg);
	return DM_ENDIO_DONE;
}
