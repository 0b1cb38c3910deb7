// SPDX-License-Identifier: GPL-2.0
/*
 * dm-wbkit-replay.c - the first resume: a blank cache device is formatted
 * (dm-wbkit-format.c), a used one has its log replayed.
 *
 * The replay rules are docs/FORMAT.md; the structures are
 * format/wbkit_format.h.
 */
#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>
#include <linux/bitops.h>
#include <linux/string.h>
#include <linux/xarray.h>

#include "dm-wbkit.h"

#define DM_MSG_PREFIX "writeboost"

/* ---------------------------------------------------------------------- */
/* Replay */

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
 * Where an entry stands in the walk's order, as kept in wb_replay's
 * `kept` xarray: 1 + its walk step * 128 + its index (0: none). Steps run
 * below nr_segments (a u32), so the value fits an xarray value entry.
 */
static unsigned long wb_walk_pos(u64 step, unsigned int index)
{
	return (unsigned long)((step << 7) | index) + 1;
}

/*
 * `kept` holds, by backing block (sector / 8), every block some entry
 * left older sectors to a newer partial one (replay_keep), with the walk
 * position of the newest clean entry that came after (0 while none did).
 * A clean entry (a discard's tombstone) says the block is what the backing
 * device holds: every sector an older entry left, however far back the
 * chain, is void, or the replay writes pre-discard data over the discard.
 * Only the block's newest entry is in the lookup, so the older ones are
 * told apart by position when they are written (wb_write_kept_sectors).
 */
static int wb_note_kept(struct xarray *kept, sector_t sector)
{
	int err = xa_insert(kept, (unsigned long)(sector >> 3),
			    xa_mk_value(0), GFP_KERNEL);

	return err == -EBUSY ? 0 : err;
}

static int wb_void_kept(struct xarray *kept, sector_t sector,
			unsigned long pos)
{
	unsigned long key = (unsigned long)(sector >> 3);

	if (!xa_load(kept, key))
		return 0;
	return xa_err(xa_store(kept, key, xa_mk_value(pos), GFP_KERNEL));
}

/*
 * Applies one valid segment (docs/FORMAT.md, replay step 3): per block the
 * newest entry wins. A newer partial entry leaves the older entry's other
 * dirty sectors to it: like upstream, those go to the backing device, so
 * that the hash table only ever needs the newest copy of a block; but only
 * after the walk, once last_writeback_id is known (wb_write_kept_sectors).
 * A newer clean entry makes the older dirty data obsolete, including the
 * sectors older entries left (`kept`).
 */
static int wb_apply_segment(struct wb_device *wb, struct wb_segment *seg,
			    void *buf, struct xarray *kept, u64 step)
{
	struct wb_segment_header_device *hdr = buf;
	unsigned int j;
	int err;

	seg->id = le64_to_cpu(hdr->id);
	seg->length = hdr->length;
	for (j = 0; j < seg->length; j++) {
		struct wb_metablock_device *md = buf + WB_METABLOCK_OFFSET(j);
		struct wb_metablock *mb = &seg->mb[j];
		struct wb_metablock *old;
		u8 bits = md->dirty_bits;
		u64 sector = le64_to_cpu(md->sector);

		wb_mb_set_sector(mb, sector);
		mb->data_bits = bits;
		mb->dirty = bits;
		mb->obsolete = false;
		mb->discarded = false;
		mb->replay_keep = 0;
		/*
		 * Never trust the disk: a block must lie inside the target
		 * (which also keeps it within the 40 bits an entry holds).
		 */
		if ((sector & (WB_BLOCK_SECTORS - 1)) || sector >= wb->ti->len) {
			DMWARN_LIMIT("segment %llu block %u names sector %llu outside the target: ignored",
				     (unsigned long long)seg->id, j,
				     (unsigned long long)sector);
			mb->data_bits = 0;
			mb->dirty = false;
			continue;
		}
		bits &= wb_bits_in_range(wb, sector);
		mb->data_bits = bits;
		mb->dirty = bits;
		/* A read-cache block: a copy of the backing device's block. */
		if (!bits && wb_clean_copy_trusted(seg->id, wb->trusted_from_id))
			mb->data_bits = wb_bits_in_range(wb, sector);

		old = wb_ht_lookup(wb, sector);
		if (old) {
			old->replay_keep = old->data_bits &
					   ~wb_entry_sectors(bits);
			wb_ht_del(wb, old);
			old->obsolete = true;
			if (old->replay_keep) {
				err = wb_note_kept(kept, sector);
				if (err)
					return err;
			}
		}
		if (!bits) {
			err = wb_void_kept(kept, sector, wb_walk_pos(step, j));
			if (err)
				return err;
		}
		if (mb->data_bits)
			wb_ht_add(wb, mb);
	}
	return 0;
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
 * Not those a newer clean entry voided (`kept`, walk positions counted
 * from oldest_slot as in wb_replay).
 */
static int wb_write_kept_sectors(struct wb_device *wb, u64 last_id, u64 lw,
				 struct xarray *kept, u64 oldest_slot,
				 bool *wrote_backing)
{
	struct wb_segment *seg;
	struct wb_metablock *mb;
	unsigned int j;
	u64 k, id, step;
	int err;

	for (k = 0; lw < last_id && k < last_id - lw; k++) {
		id = lw + 1 + k;
		seg = wb_seg_of_id(wb, id);
		if (seg->id != id || wb_segment_written_back(seg->id, lw))
			continue;
		step = (u64)(seg - wb->segs);
		step = step >= oldest_slot ? step - oldest_slot :
					     step + wb->nr_segments - oldest_slot;
		for (j = 0; j < seg->length; j++) {
			void *voided_at;

			mb = &seg->mb[j];
			if (!mb->replay_keep)
				continue;
			voided_at = xa_load(kept, (unsigned long)(wb_mb_sector(mb) >> 3));
			if (voided_at && xa_to_value(voided_at) > wb_walk_pos(step, j)) {
				mb->replay_keep = 0;
				continue;
			}
			err = wb_replay_read(wb, wb_mb_cache_sector(wb, mb),
					     wb->bounce2, WB_BLOCK_SIZE);
			if (!err)
				err = wb_write_runs(wb, wb_mb_sector(mb),
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
	*verdict = wb_checksum_matches(buf, length) ? WB_SLOT_VALID :
						      WB_SLOT_BAD;
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
static int wb_replay(struct wb_device *wb, struct xarray *kept, char **error)
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
			err = wb_apply_segment(wb, &wb->segs[slot], buf, kept,
					       step);
			if (err) {
				*error = "Out of memory while replaying the log";
				return err;
			}
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
				    plan.last_writeback_id, kept,
				    walk.oldest_slot, &wrote_backing);
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

			if (!wb_mb_hashed(mb))
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

/* wb_replay with its `kept` xarray, which lives for the replay only. */
static int wb_replay_log(struct wb_device *wb, char **error)
{
	struct xarray kept;
	int err;

	xa_init(&kept);
	err = wb_replay(wb, &kept, error);
	xa_destroy(&kept);
	return err;
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
	err = wb_replay_log(wb, error);
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
