// SPDX-License-Identifier: GPL-2.0
/*
 * dm-wbkit-flush.c - the ring's free slots and the pace new segments open
 * at, the segment buffer pool, the open segment, sealing, group commit and
 * the segment writes to the cache device.
 */
#include <linux/crc32c.h>
#include <linux/ktime.h>
#include <linux/vmalloc.h>

#include "dm-wbkit.h"

#define DM_MSG_PREFIX "writeboost"

/* ---------------------------------------------------------------------- */
/* The ring's free slots and the pace segments open at */

/*
 * Free slots of the ring from the next segment to open on (the open one's
 * slot was free when it opened, so this cannot underflow).
 */
u64 wb_free_slots(struct wb_device *wb)
{
	struct wb_segment *cur = READ_ONCE(wb->cur);
	u64 next = cur ? cur->id + 1 : READ_ONCE(wb->last_sealed_id) + 1;
	u64 end = READ_ONCE(wb->last_writeback_id) + wb->nr_segments;

	return end + 1 > next ? end + 1 - next : 0;
}

/*
 * Free slots below which writeback starts before anyone waits: a batch
 * (nr_max_batched_writeback segments), at most a quarter of the ring. Small
 * segments (a commit each: O_DSYNC and fsync writers) use a slot apiece,
 * so the ring fills after as many commits; waiting until it is full would
 * make each such writer wait for a whole batch, while starting a batch
 * earlier lets it go on in the slots still free (writeback then runs
 * beside the writes instead of between them). Full segments leave the
 * ring full all the time under load, where this changes nothing.
 */
u64 wb_low_slots(struct wb_device *wb)
{
	return min_t(u64, READ_ONCE(wb->tunable[WB_T_NR_MAX_BATCHED_WRITEBACK]),
		     max_t(u64, wb->nr_segments / 4, 1));
}

/* Fewer free slots than wb_low_slots: writeback runs, new segments are paced. */
bool wb_ring_short(struct wb_device *wb)
{
	return wb_free_slots(wb) < wb_low_slots(wb);
}

/*
 * How long after the segment about to open the next one may open while
 * the ring is short (wb_pace_open): the time the batch in progress still
 * needs (its blocks, those written ahead included, at writeback's recent
 * time per block) shared among the free slots left after this one, so the
 * last of them opens about when the batch ends and frees its own. A pause
 * of writeback's average time per segment matches the rate slots come
 * free over many batches, but within one they all come free at its end:
 * paced so, writers took the free slots in the first part of a 1.2 s
 * batch and waited 400 to 760 ms for the rest (bench/vm-peers.sh steady,
 * 32 MiB cache). With no batch in progress, or one past its due time (it
 * may end any moment), the average per segment. Called with wb->lock held.
 */
u64 wb_open_pace_ns(struct wb_device *wb, u64 now)
{
	u64 due = wb->batch_due_ns;
	u64 free = wb_free_slots(wb);

	if (!due || due <= now)
		return wb->writeback_ns_per_seg;
	/* The slot about to open is one of them; the last opens when due. */
	return div64_u64(due - now, free > 1 ? free - 1 : 1);
}

/* ---------------------------------------------------------------------- */
/* Sealing and flushing segments: group commit */

static bool wb_slot_free(struct wb_device *wb, u64 id)
{
	return wb_previous_lap_id(id, wb->nr_segments) <=
	       READ_ONCE(wb->last_writeback_id);
}

/*
 * Longest pause before a segment opens. Past it writers may run into the
 * full ring and wait for a whole batch, as they would without pacing.
 */
#define WB_PACE_MAX_NS	(200 * NSEC_PER_MSEC)

/*
 * While the ring is short of free slots (wb_ring_short), new segments open
 * at the pace writeback frees slots (wb_open_pace_ns): without
 * it writers fill the free slots at the cache device's speed and then all
 * wait for the batch in progress at once, a whole batch's time (about a
 * second over a hard disk, for the large batches that make writeback
 * fast), where paced each waits about one segment's share. With free
 * slots to spare nothing waits. Returns whether it dropped wb->lock to
 * wait. Called with wb->lock held.
 */
static bool wb_pace_open(struct wb_device *wb)
{
	u64 now = ktime_get_ns();
	u64 at = wb->next_open_ns;
	u64 pace;

	if (!wb_ring_short(wb)) {
		wb->next_open_ns = now;
		return false;
	}
	pace = min_t(u64, wb_open_pace_ns(wb, now), WB_PACE_MAX_NS);
	/* The daemon may sleep for up to a second before it looks again. */
	if (wq_has_sleeper(&wb->writeback_wait))
		wake_up(&wb->writeback_wait);
	if (at > now) {
		spin_unlock(&wb->lock);
		wait_event_hrtimeout(wb->wait, wb_dead(wb),
				     ns_to_ktime(min_t(u64, at - now, pace)));
		spin_lock(&wb->lock);
		return true;
	}
	/* Late by less than a pause: the next one is due sooner. */
	wb->next_open_ns = max(at, now - min(now, pace)) + pace;
	return false;
}

/*
 * Makes sure there is an open segment (it may be full: the caller seals a
 * full one when it needs a new block and calls again). Called with wb->lock
 * held; drops it while waiting for a RAM buffer or for the writeback of the
 * segment that still occupies the next slot of the ring. Waiting here is
 * safe in .map: the flusher and the writeback daemon never wait for a bio
 * that the caller has not submitted yet. The writeback daemon itself passes
 * wait_slot false and gets -EAGAIN instead of waiting for a slot: only it
 * frees one.
 */
int __wb_get_cur(struct wb_device *wb, bool wait_slot)
{
	struct wb_segment *seg;
	bool paced = false;
	u64 id;

	while (!wb->cur) {
		id = wb->last_sealed_id + 1;
		if (wb_dead(wb))
			return -EIO;
		if (!wb_slot_free(wb, id)) {
			if (!wait_slot)
				return -EAGAIN;
			wake_up(&wb->writeback_wait);
			spin_unlock(&wb->lock);
			wb_wait_io(wb->wait, wb_slot_free(wb, id) || wb_dead(wb));
			spin_lock(&wb->lock);
			continue;
		}
		/*
		 * One pause per segment: a wait for a buffer after it would
		 * otherwise start a second one, and segments opened at half
		 * the pace (writes waited 120 ms where 65 were due).
		 */
		if (!paced) {
			if (wb_pace_open(wb))
				continue;
			paced = true;
		}
		if (wb->nr_seg_bufs == WB_NR_RAMBUF) {
			spin_unlock(&wb->lock);
			wb_wait_io(wb->wait, READ_ONCE(wb->nr_seg_bufs) <
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
		wb_unhash_entries(wb, seg, WB_BLOCKS_PER_SEGMENT);
		/* A ring shorter than the pool: the slot still keeps its buffer. */
		if (seg->buf) {
			wb_reclaim_buf(wb, seg);
			continue;
		}
		seg->id = id;
		seg->length = 0;
		seg->frozen = 0;
		seg->on_slot = 0;
		seg->buf = wb->free_rambuf[--wb->nr_free_rambuf];
		wb->nr_seg_bufs++;
		memset(seg->buf, 0, WB_BLOCK_SIZE);
		WRITE_ONCE(wb->cur, seg);
	}
	return 0;
}

int wb_wait_flushed(struct wb_device *wb, u64 id)
{
	wb_wait_io(wb->wait, READ_ONCE(wb->last_flushed_id) >= id ||
		   wb_dead(wb));
	return wb_dead(wb) ? -EIO : 0;
}

/* Seals what is open and returns the id that must be flushed. */
u64 wb_seal_for_flush(struct wb_device *wb)
{
	u64 id;

	spin_lock(&wb->lock);
	wb_seal(wb);
	id = wb->last_sealed_id;
	spin_unlock(&wb->lock);
	return id;
}

/* Somebody needs the first len blocks of segment id durable. Under lock. */
static void wb_want_commit(struct wb_device *wb, u64 id, u8 len)
{
	if (id > wb->commit_id) {
		wb->commit_id = id;
		wb->commit_len = len;
	} else if (id == wb->commit_id) {
		wb->commit_len = max(wb->commit_len, len);
	}
}

/*
 * Adds a flush/FUA bio to the commit waiters unless the first len blocks
 * of segment id (WB_COMMIT_WHOLE: all of it) are durable already. Called
 * with wb->lock held; the caller kicks the flusher.
 */
bool wb_add_commit_waiter(struct wb_device *wb, struct bio *bio, u64 id,
			  u8 len)
{
	struct wb_per_bio *pb = dm_per_bio_data(bio, sizeof(struct wb_per_bio));

	if (wb_commit_durable(wb, id, len))
		return false;
	pb->commit_id = id;
	pb->commit_len = len;
	bio_list_add(&wb->commit_waiters, bio);
	wb_want_commit(wb, id, len);
	if (!wb->cur || id != wb->cur->id)
		return true;
	WRITE_ONCE(wb->nr_open_commits, wb->nr_open_commits + 1);
	if (wb_commit_group_gathered(wb) && wq_has_sleeper(&wb->commit_wait))
		wake_up(&wb->commit_wait);
	return true;
}

void wb_unpin_dev(struct wb_device *wb, struct wb_segment *seg)
{
	if (atomic_dec_and_test(&seg->nr_dev_readers) &&
	    wq_has_sleeper(&wb->copy_wait))
		wake_up_all(&wb->copy_wait);
}

void wb_unpin_buf(struct wb_device *wb, struct wb_segment *seg)
{
	if (atomic_dec_and_test(&seg->nr_buf_readers) &&
	    wq_has_sleeper(&wb->copy_wait))
		wake_up_all(&wb->copy_wait);
}

/*
 * Takes a segment's RAM buffer back into the pool (a kept one, or one whose
 * write failed). Called with wb->lock held; drops it while reads still copy
 * out of the buffer. Readers pin it only under the lock and through
 * seg->buf, so none can start once seg->buf is NULL: they go to the cache
 * device, which holds the same data (or fail, on a dead target).
 */
void wb_reclaim_buf(struct wb_device *wb, struct wb_segment *seg)
{
	void *buf = seg->buf;

	list_del_init(&seg->retain_node);
	seg->buf = NULL;
	if (atomic_read(&seg->nr_buf_readers)) {
		spin_unlock(&wb->lock);
		wait_event(wb->copy_wait, !atomic_read(&seg->nr_buf_readers));
		spin_lock(&wb->lock);
	}
	wb->free_rambuf[wb->nr_free_rambuf++] = buf;
}

/*
 * With no pool buffer free: takes back the oldest kept one, else waits until
 * one is free or kept (or the target dies). Called with wb->lock held; drops
 * it meanwhile, so the caller looks again. One is always free or kept, or
 * about to be (another thread's wb_reclaim_buf): the pool holds more than
 * WB_NR_RAMBUF segments, and nothing else takes a buffer from it.
 */
void wb_wait_free_buf(struct wb_device *wb)
{
	if (!list_empty(&wb->retained)) {
		wb_reclaim_buf(wb, list_first_entry(&wb->retained,
						    struct wb_segment,
						    retain_node));
		return;
	}
	spin_unlock(&wb->lock);
	wb_wait_io(wb->wait, READ_ONCE(wb->nr_free_rambuf) ||
		   !list_empty(&wb->retained) || wb_dead(wb));
	spin_lock(&wb->lock);
}

/*
 * Hands the open segment to the flusher. Called with wb->lock held; an
 * empty open segment stays open. Writes may still be copying into it
 * (seg->nr_writers): the flusher waits for them.
 */
void wb_seal(struct wb_device *wb)
{
	struct wb_segment *seg = wb->cur;

	if (!seg || !seg->length)
		return;
	WRITE_ONCE(wb->cur, NULL);
	WRITE_ONCE(wb->nr_open_commits, 0);
	WRITE_ONCE(wb->last_sealed_id, seg->id);
	if (seg->length < WB_BLOCKS_PER_SEGMENT)
		atomic64_inc(&wb->nr_partial_flushed);
	list_add_tail(&seg->flush_node, &wb->flush_queue);
	queue_work(wb->flush_wq, &wb->flush_work);
}

/* Everything written so far becomes durable on the cache device soon. */
void wb_commit(struct wb_device *wb)
{
	spin_lock(&wb->lock);
	wb_seal(wb);
	wb_want_commit(wb, wb->last_sealed_id, WB_COMMIT_WHOLE);
	spin_unlock(&wb->lock);
	queue_work(wb->flush_wq, &wb->flush_work);
}

/*
 * The open segment's blocks so far become durable on the cache device
 * soon, by an append (wb_flush_work): the segment stays open.
 */
void wb_commit_open(struct wb_device *wb)
{
	spin_lock(&wb->lock);
	if (wb->cur && wb->cur->length)
		wb_want_commit(wb, wb->cur->id, wb->cur->length);
	else
		wb_want_commit(wb, wb->last_sealed_id, WB_COMMIT_WHOLE);
	spin_unlock(&wb->lock);
	queue_work(wb->flush_wq, &wb->flush_work);
}

/* wb_commit_durable for a wait condition: takes wb->lock. */
bool wb_is_durable(struct wb_device *wb, u64 id, u8 len)
{
	bool durable;

	spin_lock(&wb->lock);
	durable = wb_commit_durable(wb, id, len);
	spin_unlock(&wb->lock);
	return durable;
}

/*
 * Completes the flush/FUA bios whose segment is durable. A dead target
 * fails the others; a bio whose segment became durable before the death
 * still succeeds: its data is on the cache device's media.
 */
static void wb_complete_commits(struct wb_device *wb)
{
	struct bio_list done = BIO_EMPTY_LIST, failed = BIO_EMPTY_LIST;
	struct bio_list keep = BIO_EMPTY_LIST;
	bool dead = wb_dead(wb);
	unsigned int nr_done = 0;
	struct bio *bio;

	spin_lock(&wb->lock);
	while ((bio = bio_list_pop(&wb->commit_waiters))) {
		struct wb_per_bio *pb =
			dm_per_bio_data(bio, sizeof(struct wb_per_bio));

		if (wb_commit_durable(wb, pb->commit_id, pb->commit_len)) {
			bio_list_add(&done, bio);
			nr_done++;
		} else if (dead) {
			bio_list_add(&failed, bio);
		} else {
			bio_list_add(&keep, bio);
		}
	}
	wb->commit_waiters = keep;
	if (nr_done)
		WRITE_ONCE(wb->last_commit_group, nr_done);
	spin_unlock(&wb->lock);
	while ((bio = bio_list_pop(&done)))
		bio_endio(bio);
	while ((bio = bio_list_pop(&failed))) {
		bio->bi_status = BLK_STS_IOERR;
		bio_endio(bio);
	}
}

static bool wb_copies_done(struct wb_device *wb, struct wb_segment *seg)
{
	bool done;

	spin_lock(&wb->lock);
	done = !seg->nr_writers;
	spin_unlock(&wb->lock);
	return done;
}

/*
 * Writes blocks [from, n) of seg into a slot whose header names its first
 * `from` blocks already, durably (appending in place, docs/FORMAT.md
 * "Segment"), in two steps:
 * 1. the new data blocks and the header block past its first logical block
 *    (the metablock area, where the device's logical block is 512 bytes),
 *    with the next slot's zeroed header (zero_next) if asked;
 * 2. the header's first logical block (id, checksum, length), with
 *    PREFLUSH so that step 1 is durable first, and FUA if asked.
 * One logical block cannot tear, so a power cut leaves the old id, length
 * and checksum, which still match the blocks below `from` (the new
 * metablocks past the old length are read as zero), or the new header with
 * every block it covers durable. Blocks below `from` are never written
 * again: seg->frozen keeps writes out of them. step1_preflush: step 1 needs
 * one too (the first append into the slot: its zeroed header or earlier
 * segments are not durable yet). A failure kills the target.
 */
static int wb_write_two_steps(struct wb_device *wb, struct wb_segment *seg,
			      void *hdr, u8 from, u8 n, bool step1_preflush,
			      bool fua, struct wb_segment *zero_next)
{
	sector_t start = wb_slot_start_sector(seg->slot);
	unsigned int lbs = wb_header_lbs(wb);
	blk_opf_t opf = REQ_OP_WRITE | (step1_preflush ? REQ_PREFLUSH : 0);
	struct wb_aio aio;
	int step, err;

	for (step = 1; step <= 2; step++) {
		do {
			wb_aio_init(&aio);
			if (step == 2) {
				wb_aio_submit(wb, &aio, WB_DEV_CACHE,
					      REQ_OP_WRITE | REQ_PREFLUSH |
					      (fua ? REQ_FUA : 0),
					      start, hdr, lbs);
			} else {
				/* PREFLUSH on each: none may land before it. */
				if (n > from)
					wb_aio_submit(wb, &aio, WB_DEV_CACHE,
						      opf,
						      wb_data_block_sector(seg->slot, from),
						      seg->buf + WB_BLOCK_SIZE * (1 + from),
						      (n - from) * WB_BLOCK_SIZE);
				if (lbs < WB_BLOCK_SIZE)
					wb_aio_submit(wb, &aio, WB_DEV_CACHE,
						      opf,
						      start + (lbs >> WB_SECTOR_SHIFT),
						      hdr + lbs, WB_BLOCK_SIZE - lbs);
				if (zero_next)
					wb_aio_submit(wb, &aio, WB_DEV_CACHE,
						      REQ_OP_WRITE,
						      wb_slot_start_sector(zero_next->slot),
						      wb->zero_block, lbs);
			}
			err = wb_aio_wait(&aio);
		} while (wb_retry_transient(wb, err));
		if (err) {
			if (!wb_dead(wb))
				wb_set_dead(wb, WB_DEV_CACHE, WB_OP_WRITE,
					    aio.err_sector, err);
			return err;
		}
	}
	return 0;
}

static bool wb_block_copies_done(struct wb_device *wb, struct wb_segment *seg,
				 u8 from, u8 n)
{
	unsigned int *copying = seg->buf + WB_SEGMENT_SIZE;
	bool done = true;
	u8 i;

	spin_lock(&wb->lock);
	for (i = from; i < n && done; i++)
		done = !copying[i];
	spin_unlock(&wb->lock);
	return done;
}

/*
 * The checksum of the header block hdr over seg's first n blocks, reading
 * only blocks [from, n): the data's CRC goes on from seg->data_crc, and
 * the header's is moved past the data by the CRC's shift (CRC-32C is
 * linear: crc(h . d) = shift(crc(h), |d|) ^ crc0(d)). An fsync a block
 * then costs the CRC of its block, not of the whole segment so far (1.1 ms
 * at half a segment under TCG). Without the shift, the whole segment.
 */
static u32 wb_append_checksum(struct wb_segment *seg, const void *hdr,
			      u8 from, u8 n)
{
#ifdef wb_crc32c_shift
	u32 crc = crc32c(0xffffffff, hdr + WB_SEGMENT_HEADER_SIZE,
			 WB_BLOCK_SIZE - WB_SEGMENT_HEADER_SIZE);

	seg->data_crc = crc32c(from ? seg->data_crc : 0,
			       seg->buf + WB_BLOCK_SIZE * (1 + from),
			       (size_t)(n - from) * WB_BLOCK_SIZE);
	return ~(wb_crc32c_shift(crc, (size_t)n * WB_BLOCK_SIZE) ^
		 seg->data_crc);
#else
	return wb_checksum_parts(hdr, seg->buf + WB_BLOCK_SIZE, n);
#endif
}

/*
 * A commit that leaves the open segment open: its blocks [on_slot, n),
 * which the caller froze (seg->frozen = n), and a header naming the first
 * n blocks go to the slot (wb_write_two_steps), and the commit waiters of
 * those blocks complete. Writes go on into the blocks past n meanwhile.
 * An fsync of a block or two costs two small writes and a flush, where a
 * sealed segment would cost a slot of the ring, and the ring would wrap,
 * and wait for writeback, every nr_segments commits. Flusher only.
 */
static void wb_append_segment(struct wb_device *wb, struct wb_segment *seg,
			      u8 n)
{
	struct wb_segment_header_device *hdr = wb->commit_header;
	u8 from = seg->on_slot;
	bool step1_preflush = false;
	u64 started;
	int err = 0;

	wait_event(wb->copy_wait, wb_block_copies_done(wb, seg, from, n));
	/* Reads of the slot's last lap finish first (see wb_write_segment). */
	wb_wait_io(wb->copy_wait, !atomic_read(&seg->nr_dev_readers));

	/* Writes past n may change the metablocks past n meanwhile: a copy. */
	spin_lock(&wb->lock);
	memcpy(hdr, seg->buf, WB_BLOCK_SIZE);
	spin_unlock(&wb->lock);
	wb_zero_metablock_tail((u8 *)hdr, n);
	hdr->id = cpu_to_le64(seg->id);
	hdr->length = n;
	hdr->checksum = cpu_to_le32(wb_append_checksum(seg, hdr, from, n));

	started = ktime_get_ns();
	if (!from) {
		if (!seg->header_zeroed) {
			err = wb_sync_io(wb, WB_DEV_CACHE, REQ_OP_WRITE,
					 wb_slot_start_sector(seg->slot),
					 wb->zero_block, wb_header_lbs(wb));
			wb->zero_unflushed = true;
		}
		step1_preflush = wb->zero_unflushed ||
				 READ_ONCE(wb->last_durable_id) + 1 < seg->id;
	}
	if (!err)
		err = wb_write_two_steps(wb, seg, hdr, from, n, step1_preflush,
					 true, NULL);
	wb->last_seg_write_ns = ktime_get_ns() - started;
	if (err)
		return;

	spin_lock(&wb->lock);
	seg->on_slot = n;
	seg->header_zeroed = false;
	/* Step 2's PREFLUSH made every earlier write durable. */
	wb->zero_unflushed = false;
	WRITE_ONCE(wb->last_durable_id, max(wb->last_durable_id, seg->id - 1));
	wb->append_durable_id = seg->id;
	wb->append_durable_len = n;
	/* As upstream counts its rewrites of a partial segment. */
	atomic64_inc(&wb->nr_partial_flushed);
	spin_unlock(&wb->lock);
	wake_up_all(&wb->wait);
}

/*
 * The bookkeeping after a sealed segment's last write, whichever way it went
 * (wb_write_segment, wb_write_appended): its buffer is retained for reads
 * or, on a failure (the target is dead), goes back to the pool; then which
 * writes are durable now. preflushed: the last write had a PREFLUSH, so
 * every earlier write is durable (zeroed headers, earlier segments);
 * durable: this segment is too (a FUA, or nothing of it left unflushed);
 * zero_next: the next slot's header was zeroed with it, durably if
 * zero_next_durable (a later PREFLUSH in the same write covered it).
 */
static void wb_segment_written(struct wb_device *wb, struct wb_segment *seg,
			       int err, bool preflushed, bool durable,
			       struct wb_segment *zero_next,
			       bool zero_next_durable)
{
	spin_lock(&wb->lock);
	wb->nr_seg_bufs--;
	if (err) {
		/* The target is dead: new readers fail, the buffer goes back. */
		wb_reclaim_buf(wb, seg);
	} else {
		list_add_tail(&seg->retain_node, &wb->retained);
		seg->header_zeroed = false;
		seg->on_slot = 0;
		if (preflushed)
			wb->zero_unflushed = false;
		if (zero_next) {
			zero_next->header_zeroed = true;
			if (!zero_next_durable)
				wb->zero_unflushed = true;
		}
		if (durable)
			WRITE_ONCE(wb->last_durable_id, seg->id);
		else if (preflushed)
			WRITE_ONCE(wb->last_durable_id,
				   max(wb->last_durable_id, seg->id - 1));
		WRITE_ONCE(wb->last_flushed_id, seg->id);
	}
	spin_unlock(&wb->lock);
	wake_up_all(&wb->wait);
	wake_up(&wb->writeback_wait);
}

/*
 * wb_write_segment for a segment that appends left on its slot already
 * (seg->on_slot blocks): the rest in two steps, or nothing when no block
 * came after the last append, whose FUA made the whole segment durable.
 * Every earlier segment is durable (the first append made it so), and
 * step 2's PREFLUSH covers step 1's write of zero_next.
 */
static void wb_write_appended(struct wb_device *wb, struct wb_segment *seg,
			      bool fua, struct wb_segment *zero_next)
{
	int err;

	if (seg->on_slot == seg->length) {
		wb_segment_written(wb, seg, 0, false, true, NULL, false);
		return;
	}
	err = wb_write_two_steps(wb, seg, seg->buf, seg->on_slot, seg->length,
				 false, fua, zero_next);
	wb_segment_written(wb, seg, err, true, fua, zero_next, true);
}

/*
 * Writes one sealed segment to its slot. Durability (which write makes which
 * earlier write durable):
 * - The slot's old header must be invalid (zero) on media before any part of
 *   this segment is: were it left in place, a torn write could put new data
 *   behind it, and as the oldest slot of the ring its bad checksum would end
 *   the log at its very start on replay. Z zeroes only the header's first
 *   logical block (wb_header_lbs), which holds the id: one block cannot
 *   tear, so a cut Z leaves the old header whole (a valid, written-back
 *   segment) or an empty slot, never the old id over zeroed metablocks.
 *   A slot zeroed at format time (made
 *   durable by format's flush) needs nothing; otherwise a zero write Z goes
 *   first, completes, and this segment's PREFLUSH makes Z durable before the
 *   segment is written. Z for the next slot is written ahead, together with
 *   this segment, when that slot is free already: the next segment's PREFLUSH
 *   then covers it (zero_unflushed forces that PREFLUSH).
 * - PREFLUSH also makes every earlier segment durable before this one, so
 *   after a power cut only the newest segment can be torn. It is left out
 *   when every earlier segment is durable already (last_durable_id >= id - 1)
 *   and no zeroed header awaits a flush.
 * - FUA makes this segment durable when the write completes. It is only
 *   needed when a flush/FUA bio (or the periodic sync) waits for this segment
 *   and no later segment is queued: otherwise the next segment's PREFLUSH
 *   makes this one durable, and the waiters complete after that write.
 */
static void wb_write_segment(struct wb_device *wb, struct wb_segment *seg,
			     bool fua, struct wb_segment *zero_next)
{
	struct wb_segment_header_device *hdr;
	sector_t start = wb_slot_start_sector(seg->slot);
	bool preflush;
	struct wb_aio aio;
	blk_opf_t opf;
	void *buf;
	u64 started;
	int err = 0;

	wait_event(wb->copy_wait, wb_copies_done(wb, seg));
	/*
	 * Reads remapped to the clean copies the slot held before it was
	 * reused finish first; none can start now (wb_get_cur unhashed them).
	 */
	wb_wait_io(wb->copy_wait, !atomic_read(&seg->nr_dev_readers));

	/* Sealed and every copy done: nothing writes to buf any more. */
	buf = seg->buf;
	hdr = buf;
	hdr->id = cpu_to_le64(seg->id);
	hdr->length = seg->length;
	hdr->checksum = cpu_to_le32(wb_checksum(buf, seg->length));

	if (seg->on_slot) {
		wb_write_appended(wb, seg, fua, zero_next);
		return;
	}
	if (!seg->header_zeroed) {
		err = wb_sync_io(wb, WB_DEV_CACHE, REQ_OP_WRITE, start,
				 wb->zero_block, wb_header_lbs(wb));
		wb->zero_unflushed = true;
	}
	preflush = wb->zero_unflushed ||
		   READ_ONCE(wb->last_durable_id) + 1 < seg->id;
	opf = REQ_OP_WRITE | (preflush ? REQ_PREFLUSH : 0) | (fua ? REQ_FUA : 0);
	started = ktime_get_ns();
	while (!err) {
		wb_aio_init(&aio);
		wb_aio_submit(wb, &aio, WB_DEV_CACHE, opf, start, buf,
			      wb_seg_bytes(seg->length));
		if (zero_next)
			wb_aio_submit(wb, &aio, WB_DEV_CACHE, REQ_OP_WRITE,
				      wb_slot_start_sector(zero_next->slot),
				      wb->zero_block, wb_header_lbs(wb));
		err = wb_aio_wait(&aio);
		if (!wb_retry_transient(wb, err))
			break;
		err = 0;
	}
	/* A failed header zeroing killed the target in wb_sync_io already. */
	if (err && !wb_dead(wb))
		wb_set_dead(wb, WB_DEV_CACHE, WB_OP_WRITE, aio.err_sector, err);
	wb->last_seg_write_ns = ktime_get_ns() - started;
	wb_segment_written(wb, seg, err, preflush, fua, zero_next, false);
}

/*
 * Before the open segment is sealed for flush/FUA bios: when the last
 * commit completed more bios than wait in it now, their senders (O_DSYNC
 * writers, journal commits) are likely sending the next ones. Waiting for
 * them, at most as long as the last segment write took (and
 * WB_GATHER_MAX_NS), lets one segment write complete them all instead of
 * a write for the first and another for the rest: at worst one commit
 * takes twice as long, and the writes per commit halve. A lone writer (a
 * group of one) never waits. Called with wb->lock held; returns true when
 * it dropped the lock to wait.
 */
static bool wb_gather_commits(struct wb_device *wb)
{
	struct wb_segment *seg = wb->cur;
	u64 wait_ns;

	if (!seg || seg->length == WB_BLOCKS_PER_SEGMENT ||
	    wb_commit_group_gathered(wb))
		return false;
	wait_ns = min_t(u64, wb->last_seg_write_ns, WB_GATHER_MAX_NS);
	spin_unlock(&wb->lock);
	wait_event_hrtimeout(wb->commit_wait,
			     READ_ONCE(wb->cur) != seg || wb_dead(wb) ||
			     wb_commit_group_gathered(wb),
			     ns_to_ktime(wait_ns));
	spin_lock(&wb->lock);
	return true;
}

/*
 * Whether the commit somebody waits for is one of the open segment, which
 * an append can make durable without sealing it: it has blocks no append
 * took yet, and room for more (a full one is sealed, its last write has
 * nothing to wait for). Called with wb->lock held.
 */
static bool wb_append_fits(struct wb_device *wb)
{
	struct wb_segment *seg = wb->cur;

	return seg && seg->id == wb->commit_id &&
	       seg->length > seg->frozen &&
	       seg->length < WB_BLOCKS_PER_SEGMENT;
}

/*
 * Writes sealed segments to the cache device one at a time in id order (the
 * workqueue is ordered, the queue is in id order) and completes the flush/FUA
 * bios. Group commit: while a segment is being written, new flush/FUA bios
 * gather in the open segment; the next round commits it and one write
 * completes all of them. A commit of the open segment appends in place
 * (wb_append_segment) and leaves it open; one with nothing new to write
 * costs one cache flush, or nothing when its blocks are durable already.
 */
void wb_flush_work(struct work_struct *work)
{
	struct wb_device *wb = container_of(work, struct wb_device, flush_work);
	struct wb_segment *seg, *zero_next, *append;
	bool fua, flush_only, pending, gathered = false;
	u8 append_len = 0;
	u64 upto;

	for (;;) {
		spin_lock(&wb->lock);
		if (wb_dead(wb)) {
			spin_unlock(&wb->lock);
			wb_complete_commits(wb);
			return;
		}
		seg = list_first_entry_or_null(&wb->flush_queue,
					       struct wb_segment, flush_node);
		append = NULL;
		pending = !wb_commit_durable(wb, wb->commit_id, wb->commit_len);
		if (!seg && pending && wb->commit_id > wb->last_sealed_id) {
			/* Look again after a wait: a writer may have sealed. */
			if (!gathered && wb_gather_commits(wb)) {
				gathered = true;
				spin_unlock(&wb->lock);
				continue;
			}
			if (wb_append_fits(wb)) {
				append = wb->cur;
				append_len = append->length;
				append->frozen = append_len;
				WRITE_ONCE(wb->nr_open_commits, 0);
			} else {
				wb_seal(wb);
				seg = list_first_entry_or_null(&wb->flush_queue,
							       struct wb_segment,
							       flush_node);
			}
		}
		fua = false;
		flush_only = false;
		zero_next = NULL;
		upto = wb->last_flushed_id;
		if (seg) {
			list_del_init(&seg->flush_node);
			fua = wb->commit_id >= seg->id &&
			      list_empty(&wb->flush_queue);
			/*
			 * The next slot's header can be zeroed now if its old
			 * segment is written back (wb_slot_free) and it is a
			 * different slot.
			 */
			if (wb->nr_segments > 1 && wb_slot_free(wb, seg->id + 1))
				zero_next = wb_seg_of_id(wb, seg->id + 1);
			if (zero_next && zero_next->header_zeroed)
				zero_next = NULL;
		} else if (!append) {
			flush_only = pending && wb->commit_id > wb->last_durable_id &&
				     wb->commit_id <= wb->last_flushed_id;
		}
		spin_unlock(&wb->lock);

		if (seg) {
			wb_write_segment(wb, seg, fua, zero_next);
			gathered = false;
		} else if (append) {
			wb_append_segment(wb, append, append_len);
			gathered = false;
		} else if (flush_only) {
			/* Every segment up to upto is written: make it durable. */
			if (!wb_flush_dev(wb, WB_DEV_CACHE)) {
				spin_lock(&wb->lock);
				wb->zero_unflushed = false;
				WRITE_ONCE(wb->last_durable_id,
					   max(wb->last_durable_id, upto));
				spin_unlock(&wb->lock);
				/* wb_forward_heads waits for it. */
				wake_up_all(&wb->wait);
			}
		} else {
			break;
		}
		wb_complete_commits(wb);
	}
	wb_complete_commits(wb);
}
