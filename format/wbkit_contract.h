/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * wbkit_contract.h - the runtime contract of the writeboost target, defined
 * once: the table options, the status line and the error counters. Rows of
 * X-macros, so the kernel target (its option table and parser, its status
 * line, its error_counts reply), the library (table lines, the status
 * parser, wbstat's names) and the tests expand the same rows;
 * tests/unit/test_contract.cpp holds the documents (kmod/README.md) to them.
 * As in wbkit_format.h, the rows are pinned at build time.
 */
#ifndef WBKIT_CONTRACT_H
#define WBKIT_CONTRACT_H

#ifdef __KERNEL__
#include <linux/build_bug.h>
#define WB_CONTRACT_CHECK(cond, msg) static_assert(cond, msg)
#elif defined(__cplusplus)
#define WB_CONTRACT_CHECK(cond, msg) static_assert(cond, msg)
#else
#define WB_CONTRACT_CHECK(cond, msg) _Static_assert(cond, msg)
#endif

/*
 * The optional table arguments (<key> <value> pairs after the count), in
 * dm-writeboost's order, which STATUSTYPE_TABLE keeps:
 *   X(ENUM, key, min, max, default, fixed, error)
 * fixed: 1 when only the table line sets it (a message naming it fails, as
 * in dm-writeboost); error: the constructor's and the message's refusal.
 */
#define WB_TUNABLE_ROWS(X)						\
	X(WRITEBACK_THRESHOLD, writeback_threshold, 0, 100, 0, 0,	\
	  "writeback_threshold must be 0..100 (percent)")		\
	X(NR_MAX_BATCHED_WRITEBACK, nr_max_batched_writeback, 1, 32, 32, 0, \
	  "nr_max_batched_writeback must be 1..32")			\
	X(UPDATE_SB_RECORD_INTERVAL, update_sb_record_interval, 0, 3600, 0, 0, \
	  "update_sb_record_interval must be 0..3600 (seconds)")	\
	X(SYNC_DATA_INTERVAL, sync_data_interval, 0, 3600, 0, 0,	\
	  "sync_data_interval must be 0..3600 (seconds)")		\
	X(READ_CACHE_THRESHOLD, read_cache_threshold, 0, 127, 0, 0,	\
	  "read_cache_threshold must be 0..127")			\
	X(WRITE_AROUND_MODE, write_around_mode, 0, 1, 0, 1,		\
	  "write_around_mode must be 0 or 1")				\
	X(NR_READ_CACHE_CELLS, nr_read_cache_cells, 1, 2048, 2048, 1,	\
	  "nr_read_cache_cells must be 1..2048")

/*
 * The status line (STATUSTYPE_INFO), dm-writeboost's layout: numbers in the
 * order of these rows, then a count of tokens and <key> <value> pairs.
 *   WB_STATUS_FIELD_ROWS: X(ENUM, name, count)   count numbers, in order
 *   WB_STATUS_PAIR_ROWS:  X(ENUM, key, kind, upstream)
 * stat counts bios by index write << 3 | hit << 2 | on_buffer << 1 |
 * fullsize. A pair of kind TUNABLE is the current value of the table
 * option of the same ENUM in WB_TUNABLE_ROWS; STATE is a figure of the
 * target. upstream: 1 when dm-writeboost prints the pair too; those come
 * first, so upstream's 10 tokens keep their places and a parser that trusts
 * the count reads dm-wbkit's line whole. dm-wbkit's own pairs go after
 * them in the order they were added, so an older dm-wbkit's line lacks
 * only the last ones. Every value is an integer.
 */
#define WB_STATUS_FIELD_ROWS(X)						\
	X(CURSOR_POS, cursor_pos, 1)					\
	X(NR_CACHE_BLOCKS, nr_cache_blocks, 1)				\
	X(NR_SEGMENTS, nr_segments, 1)					\
	X(CURRENT_ID, current_id, 1)					\
	X(LAST_FLUSHED_ID, last_flushed_id, 1)				\
	X(LAST_WRITEBACK_ID, last_writeback_id, 1)			\
	X(NR_DIRTY_CACHE_BLOCKS, nr_dirty_cache_blocks, 1)		\
	X(STAT, stat, 16)						\
	X(NR_PARTIAL_FLUSHED, nr_partial_flushed, 1)

#define WB_STATUS_PAIR_ROWS(X)						\
	X(WRITEBACK_THRESHOLD, writeback_threshold, TUNABLE, 1)	\
	X(NR_CUR_BATCHED_WRITEBACK, nr_cur_batched_writeback, STATE, 1) \
	X(SYNC_DATA_INTERVAL, sync_data_interval, TUNABLE, 1)		\
	X(UPDATE_SB_RECORD_INTERVAL, update_sb_record_interval, TUNABLE, 1) \
	X(READ_CACHE_THRESHOLD, read_cache_threshold, TUNABLE, 1)	\
	X(DEAD, dead, STATE, 0)						\
	X(NR_DISCARDED_BLOCKS, nr_discarded_blocks, STATE, 0)		\
	X(NR_DISCARDED_DIRTY, nr_discarded_dirty, STATE, 0)

/* The place of each pair in the status line, and how many there are. */
enum wb_status_pair_place {
#define WB_STATUS_PAIR_PLACE(e, key, kind, upstream) WB_STATUS_PAIR_##e,
	WB_STATUS_PAIR_ROWS(WB_STATUS_PAIR_PLACE)
#undef WB_STATUS_PAIR_PLACE
	WB_STATUS_NR_PAIRS
};

/* How many numbers each field row has (WB_STATUS_SIZE_STAT: 16). */
enum wb_status_field_size {
#define WB_STATUS_FIELD_SIZE(e, name, count) WB_STATUS_SIZE_##e = (count),
	WB_STATUS_FIELD_ROWS(WB_STATUS_FIELD_SIZE)
#undef WB_STATUS_FIELD_SIZE
};

/* The numbers before the pairs, and the pairs upstream prints. */
#define WB_STATUS_FIELD_COUNT(e, name, count) + (count)
#define WB_STATUS_PAIR_UPSTREAM(e, key, kind, upstream) + (upstream)
enum wb_status_sizes {
	WB_STATUS_NR_NUMBERS = 0 WB_STATUS_FIELD_ROWS(WB_STATUS_FIELD_COUNT),
	WB_STATUS_NR_UPSTREAM_PAIRS = 0 WB_STATUS_PAIR_ROWS(WB_STATUS_PAIR_UPSTREAM),
};
#undef WB_STATUS_FIELD_COUNT
#undef WB_STATUS_PAIR_UPSTREAM

/*
 * The error counters, in the order of the error_counts reply
 * (<name> <count> pairs), with what an error they count does to the target:
 *   X(ENUM, name, effect)
 * effect: NOT_FATAL (fails one request at most, or is retried), SOMETIMES
 * (fatal for some of the I/O it counts: backing_write and backing_flush
 * for writeback, not for write-around; cache_read for dirty data, not for
 * clean copies), FATAL
 * (every error it counts makes the target dead). kmod/README.md's fault
 * table says which failure counts where.
 */
#define WB_ERROR_COUNTER_ROWS(X)					\
	X(BACKING_READ, backing_read, NOT_FATAL)			\
	X(BACKING_WRITE, backing_write, SOMETIMES)			\
	X(BACKING_FLUSH, backing_flush, SOMETIMES)			\
	X(CACHE_READ, cache_read, SOMETIMES)				\
	X(CACHE_WRITE, cache_write, FATAL)				\
	X(CACHE_FLUSH, cache_flush, FATAL)				\
	X(CACHE_READ_FALLBACK, cache_read_fallback, NOT_FATAL)		\
	X(FAILED_REQUESTS, failed_requests, NOT_FATAL)			\
	X(TRANSIENT, transient, NOT_FATAL)

/*
 * The fault table: what an I/O error does to the target, one row per device
 * and operation, as kmod/README.md's table shows it and the VM scenarios
 * drive it (92-fault-table and others):
 *   X(ENUM, device, operation, effect, counters, scenario)
 * effect: FAILS_REQUEST (that bio fails, the target goes on),
 * SERVED_ELSEWHERE (the read is served from the backing device's copy),
 * DEAD (fail-stop), RESUME_FAILS (the resume fails, the target stays
 * alive), RETRIED (sent again as long as it lasts), NOTHING. counters: the
 * error counters it increments ("a / b": which one the operation says;
 * "none"). scenario: where a VM scenario drives it. An error counter's
 * effect (WB_ERROR_COUNTER_ROWS) is what the rows naming it do: FATAL when
 * all are DEAD, NOT_FATAL when none is, SOMETIMES otherwise
 * (tests/unit/test_contract.cpp holds the two to each other).
 */
#define WB_FAULT_ROWS(X)						\
	X(BACKING_READ_MISS, "backing",					\
	  "read miss",							\
	  FAILS_REQUEST, "backing_read, failed_requests",		\
	  "92 `miss`, 40 case 4")					\
	X(BACKING_READ_PARTIAL, "backing",				\
	  "read of the sectors a partially cached block lacks",		\
	  FAILS_REQUEST, "backing_read, failed_requests",		\
	  "92 `partial`")						\
	X(BACKING_READ_STAGING, "backing",				\
	  "read-cache staging read (a miss with `read_cache_threshold`)", \
	  FAILS_REQUEST, "backing_read, failed_requests",		\
	  "92 `staging`")						\
	X(BACKING_AROUND, "backing",					\
	  "write or flush around the cache (`write_around_mode 1`)",	\
	  FAILS_REQUEST, "backing_write / backing_flush, failed_requests", \
	  "92 `write_around`")						\
	X(BACKING_DISCARD, "backing",					\
	  "a discard passed down",					\
	  FAILS_REQUEST, "backing_write, failed_requests",		\
	  "58 `passdown_error`")					\
	X(CACHE_READ_CLEAN, "cache",					\
	  "read of a clean copy (written back, or a read-cache block)",	\
	  SERVED_ELSEWHERE, "cache_read, cache_read_fallback",		\
	  "92 `clean`")							\
	X(CACHE_READ_DIRTY, "cache",					\
	  "read of dirty data (a read hit, a partial write's merge)",	\
	  DEAD, "cache_read",						\
	  "92 `dirty`")							\
	X(CACHE_READ_REPLAY, "cache",					\
	  "replay read at the first resume (headers, segments, records, an older sector a newer partial entry keeps)", \
	  RESUME_FAILS, "cache_read",					\
	  "92 `replay`, `replay_retry`")				\
	X(CACHE_WRITE_SEGMENT, "cache",					\
	  "segment write",						\
	  DEAD, "cache_write",						\
	  "92 `seg_write`, 40 case 1")					\
	X(CACHE_WRITE_HEADER_ZERO, "cache",				\
	  "header zeroing ahead of a slot's reuse",			\
	  DEAD, "cache_write",						\
	  "92 `hdr_zero`")						\
	X(CACHE_WRITE_RECORD, "cache",					\
	  "superblock record or trust record write",			\
	  DEAD, "cache_write",						\
	  "92 `sb_record`")						\
	X(CACHE_READ_WRITEBACK, "cache",				\
	  "writeback's read of a segment",				\
	  DEAD, "cache_read",						\
	  "92 `wb_read`")						\
	X(BACKING_WRITE_WRITEBACK, "backing",				\
	  "writeback write",						\
	  DEAD, "backing_write",					\
	  "92 `wb_write`, 40 case 3")					\
	X(FLUSH, "cache or backing",					\
	  "flush",							\
	  DEAD, "cache_flush / backing_flush",				\
	  "40 case 2 (a flush cannot fail alone under dm-flakey)")	\
	X(TRANSIENT, "either",						\
	  "`BLK_STS_AGAIN` or `BLK_STS_RESOURCE` (-EAGAIN, -ENOMEM)",	\
	  RETRIED, "transient",						\
	  "(no device-mapper target injects it)")			\
	X(SLOW, "either",						\
	  "slow (dm-delay)",						\
	  NOTHING, "none",						\
	  "92 `slow`, 77 (a remove during a batch included), `make test-stress-faults`")

/* Each option's largest value, for sizes fixed at build time. */
#define WB_TUNABLE_MAX_ENUM(e, key, lo, hi, def, fixed, error)		\
	WB_TUNABLE_MAX_##e = (hi),
enum wb_tunable_max { WB_TUNABLE_ROWS(WB_TUNABLE_MAX_ENUM) };
#undef WB_TUNABLE_MAX_ENUM

/*
 * The target's kernel memory, stated in kmod/README.md ("Memory"). Per 4 KiB
 * cache block: one index entry, WB_MEM_BUCKETS_NUM / WB_MEM_BUCKETS_DEN hash
 * chain heads, and a 1/127 share of its segment's record. Per device, at
 * most WB_MEM_FIXED_BYTES (the RAM buffers, the writeback stream, the read
 * cache's cells, the writeback batch), plus, once read caching is on,
 * WB_MEM_READ_CACHE_CELL_BYTES per read-cache cell. The kernel checks its
 * structures against these at build time; test_contract holds the README's
 * formula and its table to them.
 */
#define WB_MEM_ENTRY_BYTES		12
#define WB_MEM_BUCKET_BYTES		4
#define WB_MEM_BUCKETS_NUM		3
#define WB_MEM_BUCKETS_DEN		4
#define WB_MEM_SEGMENT_BYTES		96
#define WB_MEM_FIXED_BYTES		(8u << 20)
#define WB_MEM_READ_CACHE_CELL_BYTES	4096
/* The per-block part, in thousandths of a byte: 12 + 3 + 96/127. */
#define WB_MEM_MILLIBYTES_PER_BLOCK					\
	(1000 * WB_MEM_ENTRY_BYTES +					\
	 1000 * WB_MEM_BUCKET_BYTES * WB_MEM_BUCKETS_NUM / WB_MEM_BUCKETS_DEN + \
	 (1000 * WB_MEM_SEGMENT_BYTES + 126) / 127)
WB_CONTRACT_CHECK(WB_MEM_MILLIBYTES_PER_BLOCK <= 16000,
		  "at most 16 bytes of kernel memory per cache block");

/* Every default lies in its range, and every range is not empty. */
#define WB_CONTRACT_CHECK_TUNABLE(e, key, lo, hi, def, fixed, error)	\
	WB_CONTRACT_CHECK((lo) <= (def) && (def) <= (hi) &&		\
			  ((fixed) == 0 || (fixed) == 1),		\
			  #key ": the default lies outside its range");
WB_TUNABLE_ROWS(WB_CONTRACT_CHECK_TUNABLE)
#undef WB_CONTRACT_CHECK_TUNABLE

/* Upstream's pairs come first; dm-writeboost 2.2 prints 24 numbers and 5 pairs. */
#define WB_CONTRACT_CHECK_PAIR(e, key, kind, upstream)			\
	WB_CONTRACT_CHECK(((upstream) == 0 || (upstream) == 1) &&	\
			  (!(upstream) ||				\
			   (int)WB_STATUS_PAIR_##e < (int)WB_STATUS_NR_UPSTREAM_PAIRS), \
			  #key ": a pair upstream prints comes after one it does not");
WB_STATUS_PAIR_ROWS(WB_CONTRACT_CHECK_PAIR)
#undef WB_CONTRACT_CHECK_PAIR
WB_CONTRACT_CHECK(WB_STATUS_NR_NUMBERS == 24 && WB_STATUS_NR_UPSTREAM_PAIRS == 5,
		  "dm-writeboost 2.2's status line has 24 numbers and 5 pairs");

#endif /* WBKIT_CONTRACT_H */
