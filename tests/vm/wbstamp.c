// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * wbstamp - a deterministic block workload whose expected result is known.
 *
 * Every 512-byte sector written carries a stamp: a magic, its own device
 * byte offset, the sequence number of the write that put it there, the seed,
 * and a filler word derived from (seed, seq). So any sector read back says
 * which write it came from, and whether it sits where it was written.
 *
 * Write n (n = 1, 2, ...) is a pure function of (seed, n, region, mix): a
 * whole aligned 4 KiB block or, for --partial-pct of them, one 512-byte
 * sector; for --discard-pct of them a discard of 1 to 8 whole blocks
 * (BLKDISCARD), after which the blocks read zeros (the device under test
 * passes discards on to a zeroing device) until a later write. After every write whose n is a multiple of --flush-every the
 * program calls fsync, which reaches the target as an empty REQ_PREFLUSH
 * bio. A write acknowledged before a completed flush must survive a power
 * cut; later ones may or may not.
 *
 *   wbstamp write  DEV [options]               run writes --first..--ops
 *   wbstamp verify DEV --flushed F [options]   check DEV against that rule
 *   wbstamp image  FILE --upto N [options]     the exact content after 1..N
 *
 * Built static (the guest has no libc of its own); also runs on the host.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#define SECTOR 512u
#define BLOCK 4096u
#define SECTORS_PER_BLOCK (BLOCK / SECTOR)
#define STAMP_MAGIC "WBSTAMP1"
#define MAX_REPORTED_MISMATCHES 10

struct workload {
	uint64_t seed;
	uint64_t first;		/* first write to issue (write mode) */
	uint64_t last;		/* --ops: the last write of the workload */
	uint64_t region_offset;	/* bytes, BLOCK aligned */
	uint64_t region_size;	/* bytes, BLOCK multiple; 0 = to the end */
	unsigned partial_pct;
	unsigned discard_pct;	/* percent of ops that discard 1..8 blocks */
	uint64_t flush_every;	/* 0 = never */
	bool final_flush;
	bool report_flushes;	/* write: a "WB: acked_flush=N" line per fsync */
	uint64_t flushed;	/* verify: writes 1..flushed are durable */
	uint64_t upto;		/* image: writes 1..upto are applied */
	uint64_t image_size;	/* image: file length; 0 = end of region */
	bool base_any;		/* verify: never-written sectors may hold anything */
};

struct write_op {
	uint64_t sector;	/* device sector of the first stamped sector */
	unsigned nr_sectors;	/* 1 or SECTORS_PER_BLOCK; a discard: up to 8 blocks */
	bool discard;
};

static uint64_t splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* Independent of every other write, so verify never replays the sequence. */
static struct write_op op_at(const struct workload *w, uint64_t seq)
{
	uint64_t state = w->seed * 0xd1342543de82ef95ULL ^ seq;
	uint64_t kind = splitmix64(&state);
	uint64_t where = splitmix64(&state);
	uint64_t first_sector = w->region_offset / SECTOR;
	struct write_op op = { .discard = false };

	if (w->discard_pct && kind % 100 >= 100 - w->discard_pct) {
		uint64_t blocks = w->region_size / BLOCK;
		uint64_t first = where % blocks;
		uint64_t n = 1 + (kind / 100) % 8;

		if (n > blocks - first)
			n = blocks - first;
		op.sector = first_sector + first * SECTORS_PER_BLOCK;
		op.nr_sectors = (unsigned)n * SECTORS_PER_BLOCK;
		op.discard = true;
	} else if (kind % 100 < w->partial_pct) {
		op.sector = first_sector + where % (w->region_size / SECTOR);
		op.nr_sectors = 1;
	} else {
		op.sector = first_sector + where % (w->region_size / BLOCK) * SECTORS_PER_BLOCK;
		op.nr_sectors = SECTORS_PER_BLOCK;
	}
	return op;
}

static bool op_covers(const struct write_op *op, uint64_t sector)
{
	return sector >= op->sector && sector < op->sector + op->nr_sectors;
}

static uint64_t filler_word(uint64_t seed, uint64_t seq)
{
	uint64_t state = seed ^ (seq * 0x2545f4914f6cdd1dULL);

	return splitmix64(&state);
}

static void put_le64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_le64(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

/*
 * One repeated word rather than a random stream, so images of these
 * workloads compress to almost nothing (fixtures are committed).
 */
static void stamp_sector(unsigned char *buf, uint64_t sector, uint64_t seq, uint64_t seed)
{
	uint64_t word = filler_word(seed, seq);

	memcpy(buf, STAMP_MAGIC, 8);
	put_le64(buf + 8, sector * SECTOR);
	put_le64(buf + 16, seq);
	put_le64(buf + 24, seed);
	for (unsigned off = 32; off < SECTOR; off += 8)
		put_le64(buf + off, word);
}

static bool is_flush_point(const struct workload *w, uint64_t seq)
{
	return (w->flush_every && seq % w->flush_every == 0) || (w->final_flush && seq == w->last);
}

static uint64_t device_size(int fd, const char *path)
{
	struct stat st;
	uint64_t size;

	if (fstat(fd, &st) < 0) {
		fprintf(stderr, "wbstamp: %s: %s\n", path, strerror(errno));
		exit(2);
	}
	if (!S_ISBLK(st.st_mode))
		return (uint64_t)st.st_size;
	if (ioctl(fd, BLKGETSIZE64, &size) < 0) {
		fprintf(stderr, "wbstamp: %s: BLKGETSIZE64: %s\n", path, strerror(errno));
		exit(2);
	}
	return size;
}

static void fit_region(struct workload *w, uint64_t dev_size, const char *path)
{
	if (!w->region_size && dev_size > w->region_offset)
		w->region_size = (dev_size - w->region_offset) / BLOCK * BLOCK;
	if (!w->region_size || w->region_offset + w->region_size > dev_size) {
		fprintf(stderr, "wbstamp: %s: region %" PRIu64 "+%" PRIu64 " does not fit its %" PRIu64 " bytes\n",
			path, w->region_offset, w->region_size, dev_size);
		exit(2);
	}
}

static void *aligned_buffer(size_t size)
{
	void *buf;

	if (posix_memalign(&buf, BLOCK, size)) {
		fprintf(stderr, "wbstamp: out of memory\n");
		exit(2);
	}
	return buf;
}

static int run_writes(struct workload *w, const char *path)
{
	/* O_DIRECT: an acknowledged write has reached the target, not the page cache. */
	int fd = open(path, O_RDWR | O_DIRECT);
	unsigned char *buf = aligned_buffer(BLOCK);
	uint64_t last_flushed = 0, last_written = 0, nr_flushes = 0;
	int rc = 0;

	if (fd < 0) {
		fprintf(stderr, "wbstamp: %s: %s\n", path, strerror(errno));
		return 2;
	}
	fit_region(w, device_size(fd, path), path);

	for (uint64_t seq = w->first; seq <= w->last; seq++) {
		struct write_op op = op_at(w, seq);
		size_t len = (size_t)op.nr_sectors * SECTOR;

		if (op.discard) {
			uint64_t range[2] = { op.sector * SECTOR, len };

			if (ioctl(fd, BLKDISCARD, range) < 0) {
				fprintf(stderr, "wbstamp: discard %" PRIu64 " at sector %" PRIu64 ": %s\n",
					seq, op.sector, strerror(errno));
				rc = 1;
				break;
			}
			goto written;
		}
		for (unsigned i = 0; i < op.nr_sectors; i++)
			stamp_sector(buf + i * SECTOR, op.sector + i, seq, w->seed);
		if (pwrite(fd, buf, len, (off_t)(op.sector * SECTOR)) != (ssize_t)len) {
			fprintf(stderr, "wbstamp: write %" PRIu64 " at sector %" PRIu64 ": %s\n",
				seq, op.sector, strerror(errno));
			rc = 1;
			break;
		}
written:
		last_written = seq;
		if (is_flush_point(w, seq)) {
			if (fsync(fd) < 0) {
				fprintf(stderr, "wbstamp: flush after write %" PRIu64 ": %s\n", seq, strerror(errno));
				rc = 1;
				break;
			}
			last_flushed = seq;
			nr_flushes++;
			/* Line-buffered: on the console before the next write. */
			if (w->report_flushes)
				printf("WB: acked_flush=%" PRIu64 "\n", seq);
		}
	}
	printf("last_written=%" PRIu64 "\n", last_written);
	printf("last_flushed=%" PRIu64 "\n", last_flushed);
	printf("flushes=%" PRIu64 "\n", nr_flushes);
	free(buf);
	close(fd);
	return rc;
}

/* The seq that wrote (or discarded) each region sector last among 1..upto; 0 = none. */
static uint64_t *newest_writes(const struct workload *w, uint64_t upto)
{
	uint64_t nr_sectors = w->region_size / SECTOR;
	uint64_t first_sector = w->region_offset / SECTOR;
	uint64_t *newest = calloc(nr_sectors, sizeof(*newest));

	if (!newest) {
		fprintf(stderr, "wbstamp: out of memory\n");
		exit(2);
	}
	for (uint64_t seq = 1; seq <= upto; seq++) {
		struct write_op op = op_at(w, seq);

		for (unsigned i = 0; i < op.nr_sectors; i++)
			newest[op.sector - first_sector + i] = seq;
	}
	return newest;
}

static bool all_zero(const unsigned char *buf, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (buf[i])
			return false;
	return true;
}

/* The seq whose stamp the sector holds for this seed, or 0 if it holds none. */
static uint64_t stamp_seq(const unsigned char *buf, uint64_t sector, uint64_t seed)
{
	static unsigned char expected[SECTOR];
	uint64_t seq;

	if (memcmp(buf, STAMP_MAGIC, 8) || get_le64(buf + 8) != sector * SECTOR ||
	    get_le64(buf + 24) != seed)
		return 0;
	seq = get_le64(buf + 16);
	stamp_sector(expected, sector, seq, seed);
	return memcmp(buf, expected, SECTOR) ? 0 : seq;
}

static void describe(char *out, size_t len, const unsigned char *buf, uint64_t sector, uint64_t seed)
{
	uint64_t seq = stamp_seq(buf, sector, seed);

	if (seq)
		snprintf(out, len, "write %" PRIu64, seq);
	else if (all_zero(buf, SECTOR))
		snprintf(out, len, "zeros");
	else if (!memcmp(buf, STAMP_MAGIC, 8) && get_le64(buf + 24) != seed)
		snprintf(out, len, "a stamp of seed %" PRIu64, get_le64(buf + 24));
	else if (!memcmp(buf, STAMP_MAGIC, 8))
		snprintf(out, len, "a damaged or misplaced stamp (offset %" PRIu64 ", seq %" PRIu64 ")",
			 get_le64(buf + 8), get_le64(buf + 16));
	else
		snprintf(out, len, "foreign data");
}

/* Reading through the page cache of the guest would hide what the device holds. */
static int open_maybe_direct(const char *path, int flags)
{
	int fd = open(path, flags | O_DIRECT);

	/* tmpfs on the host has no O_DIRECT; a file there has no stale cache to hide. */
	if (fd < 0 && errno == EINVAL)
		fd = open(path, flags);
	return fd;
}

static int run_verify(struct workload *w, const char *path)
{
	int fd = open_maybe_direct(path, O_RDONLY);
	uint64_t nr_sectors, first_sector, *durable;
	uint64_t nr_mismatches = 0, nr_durable = 0, nr_newer = 0, nr_discarded = 0, nr_lost_writes = 0;
	/* Acknowledged writes with a sector lost: a count of writes, not of sectors. */
	bool *lost, *zeroed_later;
	const size_t chunk = 256 * 1024;
	unsigned char *buf = aligned_buffer(chunk);

	if (fd < 0) {
		fprintf(stderr, "wbstamp: %s: %s\n", path, strerror(errno));
		return 2;
	}
	fit_region(w, device_size(fd, path), path);
	if (w->flushed > w->last) {
		fprintf(stderr, "wbstamp: --flushed %" PRIu64 " is past --ops %" PRIu64 "\n", w->flushed, w->last);
		return 2;
	}
	nr_sectors = w->region_size / SECTOR;
	first_sector = w->region_offset / SECTOR;
	durable = newest_writes(w, w->flushed);
	lost = calloc(w->flushed + 1, sizeof(*lost));
	/* Sectors a discard after the last flush may have zeroed already. */
	zeroed_later = calloc(nr_sectors, sizeof(*zeroed_later));
	for (uint64_t seq = w->flushed + 1; w->discard_pct && zeroed_later && seq <= w->last; seq++) {
		struct write_op op = op_at(w, seq);

		for (unsigned i = 0; op.discard && i < op.nr_sectors; i++)
			zeroed_later[op.sector - first_sector + i] = true;
	}
	if (!lost || !zeroed_later) {
		fprintf(stderr, "wbstamp: out of memory\n");
		return 2;
	}

	for (uint64_t done = 0; done < nr_sectors;) {
		size_t want = (nr_sectors - done) * SECTOR < chunk ? (nr_sectors - done) * SECTOR : chunk;
		ssize_t got = pread(fd, buf, want, (off_t)((first_sector + done) * SECTOR));

		if (got != (ssize_t)want) {
			fprintf(stderr, "wbstamp: %s: read at sector %" PRIu64 ": %s\n", path,
				first_sector + done, got < 0 ? strerror(errno) : "short read");
			return 2;
		}
		for (size_t i = 0; i < want / SECTOR; i++, done++) {
			const unsigned char *sec = buf + i * SECTOR;
			uint64_t sector = first_sector + done;
			uint64_t must = durable[done];
			uint64_t seq = stamp_seq(sec, sector, w->seed);
			bool ok;

			bool discarded = must && op_at(w, must).discard;

			if (seq && seq == must) {
				ok = true;
			} else if (seq > w->flushed && seq <= w->last) {
				struct write_op op = op_at(w, seq);

				ok = op_covers(&op, sector);
			} else if (discarded) {
				/* A durable discard: zeros, never an older write. */
				ok = !seq && all_zero(sec, SECTOR);
			} else if (!must) {
				ok = !seq && (w->base_any || all_zero(sec, SECTOR));
			} else {
				ok = false;
			}
			if (!ok && !seq && zeroed_later[done] && all_zero(sec, SECTOR))
				ok = true;	/* a discard in flight */
			if (!ok) {
				if (nr_mismatches < MAX_REPORTED_MISMATCHES) {
					char found[128];
					char wanted[64];

					if (discarded)
						snprintf(wanted, sizeof(wanted), "zeros (discard %" PRIu64 ")", must);
					else if (must)
						snprintf(wanted, sizeof(wanted), "write %" PRIu64, must);
					else
						snprintf(wanted, sizeof(wanted), "the base content");
					describe(found, sizeof(found), sec, sector, w->seed);
					fprintf(stderr, "wbstamp: sector %" PRIu64 ": expected %s or a later write, found %s\n",
						sector, wanted, found);
				}
				nr_mismatches++;
				if (must && !lost[must]) {
					lost[must] = true;
					nr_lost_writes++;
				}
			} else if ((seq && seq == must) || (discarded && !seq)) {
				nr_durable++;
				if (discarded)
					nr_discarded++;
			} else if (seq) {
				nr_newer++;
			}
		}
	}
	printf("verify_sectors=%" PRIu64 "\n", nr_sectors);
	printf("verify_durable=%" PRIu64 "\n", nr_durable);
	printf("verify_discarded=%" PRIu64 "\n", nr_discarded);
	printf("verify_newer=%" PRIu64 "\n", nr_newer);
	printf("verify_mismatches=%" PRIu64 "\n", nr_mismatches);
	printf("verify_lost_writes=%" PRIu64 "\n", nr_lost_writes);
	free(zeroed_later);
	free(lost);
	free(durable);
	free(buf);
	close(fd);
	return nr_mismatches ? 1 : 0;
}

static int run_image(struct workload *w, const char *path)
{
	int fd;
	unsigned char sec[SECTOR];
	uint64_t size;

	if (!w->region_size) {
		fprintf(stderr, "wbstamp: image needs --size\n");
		return 2;
	}
	size = w->image_size ? w->image_size : w->region_offset + w->region_size;
	if (w->region_offset + w->region_size > size || size % SECTOR) {
		fprintf(stderr, "wbstamp: --image-size %" PRIu64 " does not hold the region\n", size);
		return 2;
	}
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || ftruncate(fd, (off_t)size) < 0) {
		fprintf(stderr, "wbstamp: %s: %s\n", path, strerror(errno));
		return 2;
	}
	for (uint64_t seq = 1; seq <= w->upto; seq++) {
		struct write_op op = op_at(w, seq);

		for (unsigned i = 0; i < op.nr_sectors; i++) {
			if (op.discard)
				memset(sec, 0, SECTOR);
			else
				stamp_sector(sec, op.sector + i, seq, w->seed);
			if (pwrite(fd, sec, SECTOR, (off_t)((op.sector + i) * SECTOR)) != SECTOR) {
				fprintf(stderr, "wbstamp: %s: %s\n", path, strerror(errno));
				return 2;
			}
		}
	}
	if (close(fd) < 0) {
		fprintf(stderr, "wbstamp: %s: %s\n", path, strerror(errno));
		return 2;
	}
	return 0;
}

/*
 * The 4 KiB blocks of the region (aligned) whose every byte is `byte`: how
 * many blocks of a file of that byte a disk holds, where counting bytes
 * would also count file system metadata that holds the byte by chance.
 */
static int run_blocks_of(struct workload *w, const char *path, unsigned byte)
{
	int fd = open_maybe_direct(path, O_RDONLY);
	const size_t chunk = 256 * 1024;
	unsigned char *buf = aligned_buffer(chunk);
	unsigned char pattern[BLOCK];
	uint64_t count = 0;

	if (fd < 0) {
		fprintf(stderr, "wbstamp: %s: %s\n", path, strerror(errno));
		return 2;
	}
	fit_region(w, device_size(fd, path), path);
	memset(pattern, (int)byte, sizeof(pattern));
	for (uint64_t done = 0; done < w->region_size;) {
		size_t want = w->region_size - done < chunk ? (size_t)(w->region_size - done) : chunk;
		ssize_t got = pread(fd, buf, want, (off_t)(w->region_offset + done));

		if (got != (ssize_t)want) {
			fprintf(stderr, "wbstamp: %s: read at byte %" PRIu64 ": %s\n", path, w->region_offset + done,
				got < 0 ? strerror(errno) : "short read");
			return 2;
		}
		for (size_t i = 0; i < want; i += BLOCK)
			count += !memcmp(buf + i, pattern, BLOCK);
		done += want;
	}
	printf("blocks_of=%" PRIu64 "\n", count);
	close(fd);
	free(buf);
	return 0;
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: wbstamp write  DEV [options]\n"
		"       wbstamp verify DEV --flushed F [options]\n"
		"       wbstamp image  FILE --upto N [--image-size BYTES] [options]\n"
		"       wbstamp blocks-of DEV --byte B [--offset BYTES] [--size BYTES]\n"
		"                    the 4 KiB blocks whose every byte is B\n"
		"workload (must be the same for write, verify and image; sizes take K, M, G):\n"
		"  --seed S          (1)\n"
		"  --ops N           writes 1..N make the workload (1000)\n"
		"  --offset BYTES    start of the written region, 4 KiB aligned (0)\n"
		"  --size BYTES      length of the region, 4 KiB multiple (to the end)\n"
		"  --partial-pct P   percent of 512-byte writes, the rest are 4 KiB (25)\n"
		"  --discard-pct P   percent of discards of 1 to 8 blocks, read back as zeros (0)\n"
		"  --flush-every K   fsync after every write whose number is a multiple of K (16; 0 never)\n"
		"write: --first N (first write to issue, 1), --final-flush (fsync after write N),\n"
		"       --report-flushes (a line \"WB: acked_flush=N\" as each fsync returns)\n"
		"verify: --flushed F (writes 1..F are durable), --base-any (unwritten sectors unchecked)\n"
		"image: --upto N (apply writes 1..N), --image-size BYTES\n");
}

static uint64_t parse_u64(const char *opt, const char *arg)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(arg, &end, 0);
	if (errno || end == arg || *end || arg[0] == '-') {
		fprintf(stderr, "wbstamp: %s wants a number, got '%s'\n", opt, arg);
		exit(2);
	}
	return v;
}

/* A byte count, with an optional K, M or G (binary) suffix. */
static uint64_t parse_size(const char *opt, const char *arg)
{
	char digits[32];
	size_t len = strlen(arg);
	unsigned shift = 0;

	if (len && len < sizeof(digits)) {
		switch (arg[len - 1]) {
		case 'K': shift = 10; break;
		case 'M': shift = 20; break;
		case 'G': shift = 30; break;
		}
	}
	if (!shift)
		return parse_u64(opt, arg);
	memcpy(digits, arg, len - 1);
	digits[len - 1] = '\0';
	return parse_u64(opt, digits) << shift;
}

int main(int argc, char **argv)
{
	enum { O_SEED = 1, O_OPS, O_FIRST, O_OFFSET, O_SIZE, O_PARTIAL, O_DISCARD, O_FLUSH_EVERY,
	       O_FINAL_FLUSH, O_REPORT_FLUSHES, O_FLUSHED, O_UPTO, O_IMAGE_SIZE, O_BASE_ANY, O_BYTE, O_HELP };
	static const struct option options[] = {
		{ "seed", required_argument, NULL, O_SEED },
		{ "ops", required_argument, NULL, O_OPS },
		{ "first", required_argument, NULL, O_FIRST },
		{ "offset", required_argument, NULL, O_OFFSET },
		{ "size", required_argument, NULL, O_SIZE },
		{ "partial-pct", required_argument, NULL, O_PARTIAL },
		{ "discard-pct", required_argument, NULL, O_DISCARD },
		{ "flush-every", required_argument, NULL, O_FLUSH_EVERY },
		{ "final-flush", no_argument, NULL, O_FINAL_FLUSH },
		{ "report-flushes", no_argument, NULL, O_REPORT_FLUSHES },
		{ "flushed", required_argument, NULL, O_FLUSHED },
		{ "upto", required_argument, NULL, O_UPTO },
		{ "image-size", required_argument, NULL, O_IMAGE_SIZE },
		{ "base-any", no_argument, NULL, O_BASE_ANY },
		{ "byte", required_argument, NULL, O_BYTE },
		{ "help", no_argument, NULL, O_HELP },
		{ NULL, 0, NULL, 0 },
	};
	struct workload w = { .seed = 1, .first = 1, .last = 1000, .partial_pct = 25, .flush_every = 16 };
	bool have_flushed = false, have_upto = false;
	int byte = -1;
	const char *mode, *path;
	int c;

	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
		switch (c) {
		case O_SEED: w.seed = parse_u64("--seed", optarg); break;
		case O_OPS: w.last = parse_u64("--ops", optarg); break;
		case O_FIRST: w.first = parse_u64("--first", optarg); break;
		case O_OFFSET: w.region_offset = parse_size("--offset", optarg); break;
		case O_SIZE: w.region_size = parse_size("--size", optarg); break;
		case O_PARTIAL: w.partial_pct = (unsigned)parse_u64("--partial-pct", optarg); break;
		case O_DISCARD: w.discard_pct = (unsigned)parse_u64("--discard-pct", optarg); break;
		case O_FLUSH_EVERY: w.flush_every = parse_u64("--flush-every", optarg); break;
		case O_FINAL_FLUSH: w.final_flush = true; break;
		case O_REPORT_FLUSHES: w.report_flushes = true; break;
		case O_FLUSHED: w.flushed = parse_u64("--flushed", optarg); have_flushed = true; break;
		case O_UPTO: w.upto = parse_u64("--upto", optarg); have_upto = true; break;
		case O_IMAGE_SIZE: w.image_size = parse_size("--image-size", optarg); break;
		case O_BASE_ANY: w.base_any = true; break;
		case O_BYTE: {
			uint64_t b = parse_u64("--byte", optarg);

			byte = b > 255 ? 256 : (int)b;
			break;
		}
		case O_HELP: usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (argc - optind != 2) {
		usage(stderr);
		return 2;
	}
	mode = argv[optind];
	path = argv[optind + 1];
	if (w.region_offset % BLOCK || w.region_size % BLOCK || w.partial_pct + w.discard_pct > 100 || w.first < 1) {
		fprintf(stderr, "wbstamp: --offset and --size must be 4 KiB multiples, --partial-pct + --discard-pct 0..100, --first >= 1\n");
		return 2;
	}
	if (!strcmp(mode, "write"))
		return run_writes(&w, path);
	if (!strcmp(mode, "verify")) {
		if (!have_flushed) {
			fprintf(stderr, "wbstamp: verify needs --flushed\n");
			return 2;
		}
		return run_verify(&w, path);
	}
	if (!strcmp(mode, "image")) {
		if (!have_upto || w.upto > w.last) {
			fprintf(stderr, "wbstamp: image needs --upto N with N <= --ops\n");
			return 2;
		}
		return run_image(&w, path);
	}
	if (!strcmp(mode, "blocks-of")) {
		if (byte < 0 || byte > 255) {
			fprintf(stderr, "wbstamp: blocks-of needs --byte 0..255\n");
			return 2;
		}
		return run_blocks_of(&w, path, (unsigned)byte);
	}
	usage(stderr);
	return 2;
}
