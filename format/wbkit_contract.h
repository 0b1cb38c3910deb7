/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * wbkit_contract.h - the runtime contract of the writeboost target, defined
 * once: the table options and the error counters. Rows of X-macros, so the
 * kernel target (its option table and parser, its error_counts reply), the
 * library (table lines, wbstat's names) and the tests expand the same rows;
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
 * The error counters, in the order of the error_counts reply
 * (<name> <count> pairs), with what an error they count does to the target:
 *   X(ENUM, name, effect)
 * effect: NOT_FATAL (fails one request at most, or is retried), SOMETIMES
 * (fatal for some of the I/O it counts: backing_write for writeback, not
 * for write-around; cache_read for dirty data, not for clean copies), FATAL
 * (every error it counts makes the target dead). kmod/README.md's fault
 * table says which failure counts where.
 */
#define WB_ERROR_COUNTER_ROWS(X)					\
	X(BACKING_READ, backing_read, NOT_FATAL)			\
	X(BACKING_WRITE, backing_write, SOMETIMES)			\
	X(BACKING_FLUSH, backing_flush, FATAL)				\
	X(CACHE_READ, cache_read, SOMETIMES)				\
	X(CACHE_WRITE, cache_write, FATAL)				\
	X(CACHE_FLUSH, cache_flush, FATAL)				\
	X(CACHE_READ_FALLBACK, cache_read_fallback, NOT_FATAL)		\
	X(FAILED_REQUESTS, failed_requests, NOT_FATAL)			\
	X(TRANSIENT, transient, NOT_FATAL)

/* Every default lies in its range, and every range is not empty. */
#define WB_CONTRACT_CHECK_TUNABLE(e, key, lo, hi, def, fixed, error)	\
	WB_CONTRACT_CHECK((lo) <= (def) && (def) <= (hi) &&		\
			  ((fixed) == 0 || (fixed) == 1),		\
			  #key ": the default lies outside its range");
WB_TUNABLE_ROWS(WB_CONTRACT_CHECK_TUNABLE)
#undef WB_CONTRACT_CHECK_TUNABLE

#endif /* WBKIT_CONTRACT_H */
