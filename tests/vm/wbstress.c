// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * wbstress - a seeded, multi-threaded block workload that checks every read
 * online against a model of what was written.
 *
 *   wbstress run    DEV --model FILE [options]   the workload, then save the model
 *   wbstress verify DEV --model FILE             the whole device against the model
 *
 * The device (or --size bytes of it) is split among --threads writers: each
 * owns a part of a small hot region and a part of the rest, so every sector
 * has one writer and its model is exact for that writer. Every sector
 * written carries a stamp (magic, its own sector, the write's sequence
 * number, the seed, and a filler derived from them), so a read says which
 * write a sector came from and whether it sits where it was written.
 *
 * Each thread, per operation: writes of 512 B to 64 KiB (whole and partial
 * 4 KiB blocks, some with RWF_DSYNC, which reaches the target as FUA), reads
 * of its own data (must be the last write it completed, exactly), reads of
 * another thread's hot part while that thread writes (each sector must be
 * a write completed before the read started, or one started before it
 * ended), and fsyncs. The model (per sector, the sequence number of the
 * last completed write, 0 = never written, the device's initial zeros) is
 * saved to FILE, so that `verify` after a remove and create, or a later
 * `run`, starts from it. A target that is suspended meanwhile just delays
 * the I/O; messages and suspends come from the guest script.
 *
 * Built static (the guest has no libc of its own).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define SECTOR 512u
#define MAX_SECTORS_PER_IO 128u /* 64 KiB */
#define MAX_THREADS 16u
#define STAMP_MAGIC 0x5353455254534257ULL /* "WBSTRESS" */
#define MAX_REPORTED 10

struct options {
	uint64_t seed;
	uint64_t ops;		/* per thread */
	unsigned threads;
	uint64_t size;		/* bytes of the device used */
	uint64_t hot;		/* bytes at the start shared by the hot parts */
	unsigned dsync_pct;
	unsigned fsync_pct;
	unsigned peek_pct;	/* reads of another thread's hot part */
	unsigned read_pct;	/* reads of its own data */
};

struct model {
	uint64_t nr_sectors;
	_Atomic uint32_t *done;		/* last completed write of the sector */
	_Atomic uint32_t *started;	/* last started write of the sector */
	_Atomic uint32_t next_seq;
};

struct worker {
	pthread_t thread;
	unsigned index;
	int fd;
	const struct options *opt;
	struct model *model;
	uint64_t state;
	uint64_t writes, reads, peeks, fsyncs, dsyncs;
	int failed;
	char error[512];
};

static _Atomic int stop_all;

static uint64_t splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint64_t below(uint64_t *state, uint64_t n)
{
	return n ? splitmix64(state) % n : 0;
}

static uint64_t filler(uint64_t seed, uint32_t seq, uint64_t sector, unsigned word)
{
	uint64_t s = seed ^ ((uint64_t)seq << 32) ^ (sector * 0x9e3779b97f4a7c15ULL) ^ word;

	return splitmix64(&s);
}

static void stamp_sector(uint8_t *p, uint64_t seed, uint32_t seq, uint64_t sector)
{
	uint64_t words[SECTOR / 8];
	unsigned i;

	words[0] = STAMP_MAGIC;
	words[1] = sector;
	words[2] = seq;
	words[3] = seed;
	for (i = 4; i < SECTOR / 8; i++)
		words[i] = filler(seed, seq, sector, i);
	memcpy(p, words, SECTOR);
}

/*
 * The write a sector read back came from: its sequence number, 0 for an
 * all-zero sector (never written), or -1 for anything else (torn, misplaced,
 * foreign data).
 */
static int64_t stamp_of(const uint8_t *p, uint64_t seed, uint64_t sector)
{
	uint64_t words[SECTOR / 8];
	unsigned i;

	memcpy(words, p, SECTOR);
	if (words[0] != STAMP_MAGIC) {
		for (i = 0; i < SECTOR / 8; i++)
			if (words[i])
				return -1;
		return 0;
	}
	if (words[1] != sector || words[3] != seed || !words[2] || words[2] > UINT32_MAX)
		return -1;
	for (i = 4; i < SECTOR / 8; i++)
		if (words[i] != filler(seed, (uint32_t)words[2], sector, i))
			return -1;
	return (int64_t)words[2];
}

__attribute__((format(printf, 2, 3)))
static int fail(struct worker *w, const char *fmt, ...)
{
	va_list ap;

	if (!w->failed) {
		va_start(ap, fmt);
		vsnprintf(w->error, sizeof(w->error), fmt, ap);
		va_end(ap);
	}
	w->failed = 1;
	atomic_store(&stop_all, 1);
	return -1;
}

/* A range of this worker's own sectors: [first, first + n). */
static void pick_own_range(struct worker *w, bool hot, uint64_t *first, unsigned *n)
{
	const struct options *o = w->opt;
	uint64_t hot_sectors = o->hot / SECTOR, cold_sectors = o->size / SECTOR - hot_sectors;
	uint64_t part_start, part_len;
	unsigned len;

	if (hot) {
		part_len = hot_sectors / o->threads;
		part_start = part_len * w->index;
	} else {
		part_len = cold_sectors / o->threads;
		part_start = hot_sectors + part_len * w->index;
	}
	/* Whole blocks mostly, partial ones (unaligned, odd lengths) often. */
	if (below(&w->state, 3)) {
		len = 8 * (1 + (unsigned)below(&w->state, MAX_SECTORS_PER_IO / 8));
		*first = part_start + 8 * below(&w->state, part_len / 8);
	} else {
		len = 1 + (unsigned)below(&w->state, MAX_SECTORS_PER_IO);
		*first = part_start + below(&w->state, part_len);
	}
	if (*first + len > part_start + part_len)
		len = (unsigned)(part_start + part_len - *first);
	*n = len;
}

static int do_write(struct worker *w, uint8_t *buf)
{
	struct model *m = w->model;
	uint64_t first;
	unsigned n, i;
	uint32_t seq = atomic_fetch_add(&m->next_seq, 1);
	bool dsync = below(&w->state, 100) < w->opt->dsync_pct;
	struct iovec iov;
	ssize_t r;

	pick_own_range(w, below(&w->state, 10) < 7, &first, &n);
	for (i = 0; i < n; i++) {
		stamp_sector(buf + (size_t)i * SECTOR, w->opt->seed, seq, first + i);
		atomic_store(&m->started[first + i], seq);
	}
	iov.iov_base = buf;
	iov.iov_len = (size_t)n * SECTOR;
	r = pwritev2(w->fd, &iov, 1, (off_t)(first * SECTOR), dsync ? RWF_DSYNC : 0);
	if (r != (ssize_t)iov.iov_len)
		return fail(w, "write of %" PRIu64 "+%u failed: %s", first, n, r < 0 ? strerror(errno) : "short");
	for (i = 0; i < n; i++)
		atomic_store(&m->done[first + i], seq);
	w->writes++;
	w->dsyncs += dsync;
	return 0;
}

/* Reads of its own sectors: exactly the last write of each. */
static int do_read_own(struct worker *w, uint8_t *buf)
{
	struct model *m = w->model;
	uint64_t first;
	unsigned n, i;

	pick_own_range(w, below(&w->state, 10) < 7, &first, &n);
	if (pread(w->fd, buf, (size_t)n * SECTOR, (off_t)(first * SECTOR)) != (ssize_t)n * SECTOR)
		return fail(w, "read of %" PRIu64 "+%u failed: %s", first, n, strerror(errno));
	for (i = 0; i < n; i++) {
		int64_t got = stamp_of(buf + (size_t)i * SECTOR, w->opt->seed, first + i);
		uint32_t want = atomic_load(&m->done[first + i]);

		if (got != want)
			return fail(w, "own read: sector %" PRIu64 " holds write %" PRId64 ", the last write of it was %u",
				    first + i, got, want);
	}
	w->reads++;
	return 0;
}

/* Reads of another thread's hot part while it writes. */
static int do_peek(struct worker *w, uint8_t *buf)
{
	struct model *m = w->model;
	const struct options *o = w->opt;
	uint64_t part_len = o->hot / SECTOR / o->threads;
	unsigned other = (w->index + 1 + (unsigned)below(&w->state, o->threads - 1)) % o->threads;
	uint64_t first = part_len * other + below(&w->state, part_len);
	unsigned n = 1 + (unsigned)below(&w->state, 16), i;
	uint32_t before[16];

	if (first + n > part_len * (other + 1))
		n = (unsigned)(part_len * (other + 1) - first);
	for (i = 0; i < n; i++)
		before[i] = atomic_load(&m->done[first + i]);
	if (pread(w->fd, buf, (size_t)n * SECTOR, (off_t)(first * SECTOR)) != (ssize_t)n * SECTOR)
		return fail(w, "read of %" PRIu64 "+%u failed: %s", first, n, strerror(errno));
	for (i = 0; i < n; i++) {
		int64_t got = stamp_of(buf + (size_t)i * SECTOR, o->seed, first + i);
		uint32_t after = atomic_load(&m->started[first + i]);

		/* One writer per sector: its writes' numbers rise. */
		if (got < 0 || (uint64_t)got < before[i] || (uint64_t)got > after)
			return fail(w, "concurrent read: sector %" PRIu64 " holds write %" PRId64
				    ", not one between the last completed before the read (%u) and the last started by its end (%u)",
				    first + i, got, before[i], after);
	}
	w->peeks++;
	return 0;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	const struct options *o = w->opt;
	uint8_t *buf;
	uint64_t k;

	if (posix_memalign((void **)&buf, 4096, MAX_SECTORS_PER_IO * SECTOR)) {
		snprintf(w->error, sizeof(w->error), "out of memory");
		w->failed = 1;
		return NULL;
	}
	for (k = 0; k < o->ops && !atomic_load(&stop_all); k++) {
		uint64_t dice = below(&w->state, 100);
		int r;

		if (dice < o->fsync_pct) {
			r = fsync(w->fd);
			if (r)
				fail(w, "fsync failed: %s", strerror(errno));
			w->fsyncs++;
		} else if (dice < o->fsync_pct + o->peek_pct && o->threads > 1) {
			r = do_peek(w, buf);
		} else if (dice < o->fsync_pct + o->peek_pct + o->read_pct) {
			r = do_read_own(w, buf);
		} else {
			r = do_write(w, buf);
		}
		if (r)
			break;
	}
	free(buf);
	return NULL;
}

static int open_device(const char *path, uint64_t *bytes)
{
	int fd = open(path, O_RDWR | O_DIRECT);
	struct stat st;

	if (fd < 0) {
		fprintf(stderr, "wbstress: cannot open %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) == 0 && S_ISBLK(st.st_mode)) {
		if (ioctl(fd, BLKGETSIZE64, bytes)) {
			fprintf(stderr, "wbstress: BLKGETSIZE64: %s\n", strerror(errno));
			return -1;
		}
	} else {
		*bytes = (uint64_t)st.st_size;
	}
	return fd;
}

/* The model file: "WBSTRESSMODEL", nr_sectors, next_seq, then done[] (u32 each). */
static int load_model(const char *path, struct model *m, uint64_t nr_sectors)
{
	FILE *f = fopen(path, "rb");
	char magic[16];
	uint64_t n = 0;
	uint32_t next = 1;
	uint64_t i;

	m->nr_sectors = nr_sectors;
	m->done = calloc(nr_sectors, sizeof(*m->done));
	m->started = calloc(nr_sectors, sizeof(*m->started));
	if (!m->done || !m->started)
		return -1;
	atomic_store(&m->next_seq, 1);
	if (!f)
		return errno == ENOENT ? 0 : -1;
	if (fread(magic, 1, 16, f) != 16 || memcmp(magic, "WBSTRESSMODEL\0\0\0", 16) ||
	    fread(&n, 8, 1, f) != 1 || fread(&next, 4, 1, f) != 1 || n != nr_sectors) {
		fprintf(stderr, "wbstress: %s is not a model of this device\n", path);
		fclose(f);
		return -1;
	}
	for (i = 0; i < n; i++) {
		uint32_t v;

		if (fread(&v, 4, 1, f) != 1) {
			fclose(f);
			return -1;
		}
		atomic_store(&m->done[i], v);
		atomic_store(&m->started[i], v);
	}
	atomic_store(&m->next_seq, next);
	fclose(f);
	return 0;
}

static int save_model(const char *path, struct model *m)
{
	FILE *f = fopen(path, "wb");
	uint32_t next = atomic_load(&m->next_seq);
	uint64_t i;

	if (!f)
		return -1;
	fwrite("WBSTRESSMODEL\0\0\0", 1, 16, f);
	fwrite(&m->nr_sectors, 8, 1, f);
	fwrite(&next, 4, 1, f);
	for (i = 0; i < m->nr_sectors; i++) {
		uint32_t v = atomic_load(&m->done[i]);

		fwrite(&v, 4, 1, f);
	}
	return fclose(f);
}

/* Every sector of the used part against the model, exactly. */
static int verify(int fd, struct model *m, uint64_t seed)
{
	uint8_t *buf;
	uint64_t s, bad = 0, chunk = 2048;

	if (posix_memalign((void **)&buf, 4096, chunk * SECTOR))
		return -1;
	for (s = 0; s < m->nr_sectors; s += chunk) {
		uint64_t n = m->nr_sectors - s < chunk ? m->nr_sectors - s : chunk, i;

		if (pread(fd, buf, n * SECTOR, (off_t)(s * SECTOR)) != (ssize_t)(n * SECTOR)) {
			fprintf(stderr, "wbstress: read at sector %" PRIu64 " failed: %s\n", s, strerror(errno));
			free(buf);
			return -1;
		}
		for (i = 0; i < n; i++) {
			int64_t got = stamp_of(buf + i * SECTOR, seed, s + i);
			uint32_t want = atomic_load(&m->done[s + i]);

			if (got != want) {
				if (bad < MAX_REPORTED)
					printf("mismatch: sector %" PRIu64 " holds write %" PRId64 ", the model says %u\n",
					       s + i, got, want);
				bad++;
			}
		}
	}
	free(buf);
	printf("verify: %" PRIu64 " sectors, %" PRIu64 " mismatches\n", m->nr_sectors, bad);
	return bad ? 1 : 0;
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: wbstress run    DEV --model FILE [options]\n"
		"       wbstress verify DEV --model FILE [--seed S] [--size BYTES]\n"
		"  --seed S        (1)\n"
		"  --ops N         operations per thread (2000)\n"
		"  --threads T     (4, at most 16)\n"
		"  --size BYTES    bytes of the device used (all of it); K, M, G\n"
		"  --hot BYTES     the shared hot region at its start (256K)\n"
		"  --dsync-pct P   writes with RWF_DSYNC (FUA) (10)\n"
		"  --fsync-pct P   fsyncs among the operations (3)\n"
		"  --read-pct P    reads of a thread's own data (30)\n"
		"  --peek-pct P    reads of another thread's hot data (15)\n");
}

static uint64_t parse_size(const char *s)
{
	char *end;
	uint64_t v = strtoull(s, &end, 0);

	switch (*end) {
	case 'G': v <<= 10; /* fall through */
	case 'M': v <<= 10; /* fall through */
	case 'K': v <<= 10; end++; break;
	default: break;
	}
	if (*end) {
		fprintf(stderr, "wbstress: bad size %s\n", s);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "model", required_argument, NULL, 'm' },
		{ "seed", required_argument, NULL, 's' },
		{ "ops", required_argument, NULL, 'n' },
		{ "threads", required_argument, NULL, 't' },
		{ "size", required_argument, NULL, 'z' },
		{ "hot", required_argument, NULL, 'h' },
		{ "dsync-pct", required_argument, NULL, 'd' },
		{ "fsync-pct", required_argument, NULL, 'f' },
		{ "read-pct", required_argument, NULL, 'r' },
		{ "peek-pct", required_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'H' },
		{ NULL, 0, NULL, 0 },
	};
	struct options o = { .seed = 1, .ops = 2000, .threads = 4, .hot = 256 << 10,
			     .dsync_pct = 10, .fsync_pct = 3, .read_pct = 30, .peek_pct = 15 };
	struct worker workers[MAX_THREADS];
	const char *model_path = NULL, *mode, *dev;
	struct model model;
	uint64_t dev_bytes = 0, total[5] = { 0 };
	int c, fd, failed = 0;
	unsigned i;

	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'm': model_path = optarg; break;
		case 's': o.seed = strtoull(optarg, NULL, 0); break;
		case 'n': o.ops = strtoull(optarg, NULL, 0); break;
		case 't': o.threads = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'z': o.size = parse_size(optarg); break;
		case 'h': o.hot = parse_size(optarg); break;
		case 'd': o.dsync_pct = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'f': o.fsync_pct = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'r': o.read_pct = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'p': o.peek_pct = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'H': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (argc - optind != 2 || !model_path || !o.threads || o.threads > MAX_THREADS) {
		usage(stderr);
		return 2;
	}
	mode = argv[optind];
	dev = argv[optind + 1];
	fd = open_device(dev, &dev_bytes);
	if (fd < 0)
		return 3;
	if (!o.size || o.size > dev_bytes)
		o.size = dev_bytes;
	o.size -= o.size % (4096ULL * o.threads);
	if (o.hot > o.size / 2)
		o.hot = o.size / 2;
	o.hot -= o.hot % (4096ULL * o.threads);
	if (!o.hot || o.size <= o.hot) {
		fprintf(stderr, "wbstress: device too small\n");
		return 2;
	}
	if (load_model(model_path, &model, o.size / SECTOR)) {
		fprintf(stderr, "wbstress: cannot load the model %s\n", model_path);
		return 3;
	}
	if (!strcmp(mode, "verify"))
		return verify(fd, &model, o.seed);
	if (strcmp(mode, "run")) {
		usage(stderr);
		return 2;
	}

	for (i = 0; i < o.threads; i++) {
		workers[i] = (struct worker){ .index = i, .fd = fd, .opt = &o, .model = &model,
					      .state = o.seed * 0x9e3779b97f4a7c15ULL + i + atomic_load(&model.next_seq) };
		if (pthread_create(&workers[i].thread, NULL, worker_main, &workers[i])) {
			fprintf(stderr, "wbstress: cannot start thread %u\n", i);
			return 3;
		}
	}
	for (i = 0; i < o.threads; i++) {
		pthread_join(workers[i].thread, NULL);
		total[0] += workers[i].writes;
		total[1] += workers[i].reads;
		total[2] += workers[i].peeks;
		total[3] += workers[i].fsyncs;
		total[4] += workers[i].dsyncs;
		if (workers[i].failed) {
			printf("thread %u: %s\n", i, workers[i].error);
			failed = 1;
		}
	}
	printf("run: %" PRIu64 " writes (%" PRIu64 " dsync), %" PRIu64 " own reads, %" PRIu64
	       " concurrent reads, %" PRIu64 " fsyncs, %s\n",
	       total[0], total[4], total[1], total[2], total[3], failed ? "FAILED" : "every read matched the model");
	if (save_model(model_path, &model)) {
		fprintf(stderr, "wbstress: cannot save the model %s\n", model_path);
		return 3;
	}
	return failed;
}
