// The status and table lines of both modules (wb_status.hpp) and wbstat's
// reports, on lines the kernel printed: the upstream, dm-wbkit and dead
// lines are scenario 80-status-layout's, the `dmsetup` outputs
// fixtures/status/ holds were captured by scenario 89-wbstat. Those predate
// the discard counters: they are an older dm-wbkit's lines, which must still
// read; discard_line has the pairs the module prints now.
#include <fstream>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <numeric>
#include <regex>
#include <sstream>

#include "wbkit/report.hpp"
#include "wbkit/wb_status.hpp"

using namespace wbkit;

namespace {

// dm-writeboost 2.2.17 after 100 writes to one block and a flushed workload.
const std::string upstream_line =
	"762 1778 14 21 20 10 139 0 0 0 0 0 0 0 0 75 191 0 0 9 23 0 102 10 10 writeback_threshold 0 "
	"nr_cur_batched_writeback 2 sync_data_interval 0 update_sb_record_interval 0 read_cache_threshold 0";
// dm-wbkit, the same steps.
const std::string wbkit_line =
	"1270 1778 14 11 10 0 262 0 0 0 0 0 0 0 0 73 189 0 0 11 25 0 102 10 12 writeback_threshold 0 "
	"nr_cur_batched_writeback 0 sync_data_interval 0 update_sb_record_interval 0 read_cache_threshold 0 dead 0";
// dm-wbkit killed by a backing read error.
const std::string dead_line =
	"1270 1778 14 11 10 0 262 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 12 writeback_threshold 0 "
	"nr_cur_batched_writeback 0 sync_data_interval 0 update_sb_record_interval 0 read_cache_threshold 0 dead 1";
// dm-wbkit under fio with writeback_threshold 50: every kind of bio counted.
const std::string busy_line =
	"1311 1778 14 109 108 104 362 916 1922 0 0 3954 3035 630 151 1880 5025 0 0 2773 80 847 3 75 12 "
	"writeback_threshold 50 nr_cur_batched_writeback 4 sync_data_interval 0 update_sb_record_interval 0 "
	"read_cache_threshold 0 dead 0";
// wbkit_line's target after a blkdiscard that dropped 300 cached blocks,
// 262 of them dirty (none left dirty), in the layout the module prints now
// (format/wbkit_contract.h's rows: 16 tokens, the discard counters last).
const std::string discard_line =
	"1270 1778 14 11 10 0 0 0 0 0 0 0 0 0 0 73 189 0 0 11 25 0 102 10 16 writeback_threshold 0 "
	"nr_cur_batched_writeback 0 sync_data_interval 0 update_sb_record_interval 0 read_cache_threshold 0 dead 0 "
	"nr_discarded_blocks 300 nr_discarded_dirty 262";

std::string data_file(const std::string& name)
{
	std::ifstream in(std::string(WBKIT_SOURCE_DIR) + "/fixtures/status/" + name);
	EXPECT_TRUE(in) << name;
	std::stringstream text;
	text << in.rdbuf();
	return text.str();
}

std::string error_of(const std::function<void()>& f)
{
	try {
		f();
	} catch (const StatusFormatError& e) {
		return e.what();
	}
	return "(no error)";
}

} // namespace

TEST(WbStatus, UpstreamLineFieldByField)
{
	const WbStatus s = parse_wb_status(upstream_line);
	EXPECT_EQ(s.cursor_pos, 762u);
	EXPECT_EQ(s.nr_cache_blocks, 1778u);
	EXPECT_EQ(s.nr_segments, 14u);
	EXPECT_EQ(s.current_id, 21u);
	EXPECT_EQ(s.last_flushed_id, 20u);
	EXPECT_EQ(s.last_writeback_id, 10u);
	EXPECT_EQ(s.nr_dirty_cache_blocks, 139u);
	EXPECT_EQ(s.stat[8], 75u);
	EXPECT_EQ(s.stat[15], 102u);
	EXPECT_EQ(s.nr_partial_flushed, 10u);
	ASSERT_EQ(s.pairs.size(), 5u);
	EXPECT_EQ(s.pairs[0].first, "writeback_threshold");
	EXPECT_EQ(s.pair("nr_cur_batched_writeback"), 2u);
	EXPECT_EQ(s.pair("read_cache_threshold"), 0u);
	EXPECT_EQ(s.pair("dead"), std::nullopt);
	EXPECT_EQ(s.module(), TargetModule::dm_writeboost);
	EXPECT_EQ(s.dead(), std::nullopt);
	EXPECT_EQ(s.discarded_blocks(), std::nullopt);
	EXPECT_EQ(s.discarded_dirty_blocks(), std::nullopt);
}

TEST(WbStatus, WbkitLinesAliveAndDead)
{
	const WbStatus alive = parse_wb_status(wbkit_line);
	EXPECT_EQ(alive.module(), TargetModule::dm_wbkit);
	EXPECT_EQ(alive.dead(), false);
	EXPECT_EQ(alive.pairs.size(), 6u);
	EXPECT_EQ(alive.current_id, 11u);
	const WbStatus dead = parse_wb_status(dead_line);
	EXPECT_EQ(dead.module(), TargetModule::dm_wbkit);
	EXPECT_EQ(dead.dead(), true);
	EXPECT_EQ(dead.stat[1], 1u);
	EXPECT_EQ(target_module_name(dead.module()), "dm-wbkit");
	EXPECT_EQ(target_module_name(TargetModule::dm_writeboost), "dm-writeboost");
	// Lines of a dm-wbkit from before discard support: no counters.
	EXPECT_EQ(alive.discarded_blocks(), std::nullopt);
	EXPECT_EQ(dead.discarded_dirty_blocks(), std::nullopt);
}

TEST(WbStatus, DiscardCountersAfterDead)
{
	const WbStatus s = parse_wb_status(discard_line);
	EXPECT_EQ(s.module(), TargetModule::dm_wbkit);
	EXPECT_EQ(s.dead(), false);
	ASSERT_EQ(s.pairs.size(), 8u);
	EXPECT_EQ(s.pairs[5].first, "dead");
	EXPECT_EQ(s.pairs[6], (std::pair<std::string, std::uint64_t>{"nr_discarded_blocks", 300}));
	EXPECT_EQ(s.pairs[7], (std::pair<std::string, std::uint64_t>{"nr_discarded_dirty", 262}));
	EXPECT_EQ(s.discarded_blocks(), 300u);
	EXPECT_EQ(s.discarded_dirty_blocks(), 262u);
	EXPECT_EQ(s.nr_dirty_cache_blocks, 0u);
	// The kernel prints them as u64: past 2^32 they read.
	std::string big = discard_line;
	big.replace(big.find("blocks 300"), 10, "blocks 4294967296");
	EXPECT_EQ(parse_wb_status(big).discarded_blocks(), 4294967296u);
	// A count that leaves them out is an error, as for any pair.
	std::string short_count = discard_line;
	short_count.replace(short_count.find(" 16 writeback"), 4, " 12 ");
	EXPECT_NE(error_of([&] { parse_wb_status(short_count); }).find("says 12 key/value tokens, but 16"),
		  std::string::npos);
}

TEST(WbStatus, FiguresOfABusyTarget)
{
	const WbStatus s = parse_wb_status(busy_line);
	const WbFigures f = wb_figures(s);
	// stat0..7 reads: 916 1922 0 0 3954 3035 630 151; writes: 1880 5025 0 0 2773 80 847 3.
	EXPECT_EQ(f.reads, 916u + 1922 + 3954 + 3035 + 630 + 151);
	EXPECT_EQ(f.read_hits, 3954u + 3035 + 630 + 151);
	EXPECT_EQ(f.read_hits_on_buffer, 630u + 151);
	EXPECT_EQ(f.reads_fullsize, 1922u + 3035 + 151);
	EXPECT_EQ(f.writes, 1880u + 5025 + 2773 + 80 + 847 + 3);
	EXPECT_EQ(f.write_hits, 2773u + 80 + 847 + 3);
	EXPECT_EQ(f.write_hits_on_buffer, 847u + 3);
	EXPECT_EQ(f.writes_fullsize, 5025u + 80 + 3);
	ASSERT_TRUE(f.read_hit_ratio);
	EXPECT_DOUBLE_EQ(*f.read_hit_ratio, double(f.read_hits) / double(f.reads));
	EXPECT_DOUBLE_EQ(*f.write_hit_ratio, double(f.write_hits) / double(f.writes));
	EXPECT_EQ(f.dirty_blocks, 362u);
	EXPECT_EQ(f.dirty_bytes, 362u * 4096);
	EXPECT_EQ(f.cache_bytes, 1778u * 4096);
	EXPECT_DOUBLE_EQ(*f.dirty_ratio, 362.0 / 1778);
	EXPECT_EQ(f.segments_in_use, 109u - 104);
	EXPECT_EQ(f.segments_unflushed, 1u);
	EXPECT_EQ(f.segments_to_write_back, 4u);
	EXPECT_DOUBLE_EQ(*f.segments_in_use_ratio, 5.0 / 14);
}

TEST(WbStatus, NoBiosNoRatio)
{
	const WbFigures f = wb_figures(parse_wb_status(dead_line));
	EXPECT_EQ(f.reads, 1u);
	EXPECT_EQ(f.read_hit_ratio, 0.0);
	EXPECT_EQ(f.writes, 0u);
	EXPECT_EQ(f.write_hit_ratio, std::nullopt);
}

TEST(WbStatus, BadLinesNameWhatIsWrong)
{
	EXPECT_NE(error_of([] { parse_wb_status("1 2 3"); }).find("at least 25 fields"), std::string::npos);
	std::string bad = upstream_line;
	bad.replace(bad.find(" 21 "), 4, " x1 ");
	EXPECT_NE(error_of([&] { parse_wb_status(bad); }).find("field 4 (current_id) is not a number: 'x1'"),
		  std::string::npos);
	EXPECT_NE(error_of([] { parse_wb_status(std::string(24 * 2, ' ').replace(0, 1, "-")); }).find("at least"),
		  std::string::npos);
	bad = upstream_line;
	bad.replace(0, 3, "-12");
	EXPECT_NE(error_of([&] { parse_wb_status(bad); }).find("field 1 (cursor_pos)"), std::string::npos);
	bad = upstream_line;
	bad.replace(0, 3, "18446744073709551616"); // 2^64
	EXPECT_NE(error_of([&] { parse_wb_status(bad); }).find("field 1 (cursor_pos)"), std::string::npos);
	EXPECT_NE(error_of([] { parse_wb_status(upstream_line + " dead"); }).find("says 10 key/value tokens, but 11"),
		  std::string::npos);
	bad = upstream_line;
	bad.replace(bad.find(" 10 writeback"), 4, " 9 ");
	EXPECT_NE(error_of([&] { parse_wb_status(bad); }).find("odd"), std::string::npos);
	bad = upstream_line;
	bad.replace(bad.find("threshold 0"), 11, "threshold on");
	EXPECT_NE(error_of([&] { parse_wb_status(bad); }).find("the value of writeback_threshold is not a number"),
		  std::string::npos);
	bad = wbkit_line;
	bad.back() = '2';
	EXPECT_NE(error_of([&] { parse_wb_status(bad); }).find("dead is 2"), std::string::npos);
	// The largest value a counter can hold reads.
	bad = upstream_line;
	bad.replace(0, 3, "18446744073709551615");
	EXPECT_EQ(parse_wb_status(bad).cursor_pos, 18446744073709551615u);
	// Extra spaces and a carriage return are not an error.
	EXPECT_EQ(parse_wb_status("  " + upstream_line + " \r\n").current_id, 21u);
}

TEST(WbTable, BothModulesShapes)
{
	const WbTable plain = parse_wb_table("254:0 254:16");
	EXPECT_EQ(plain.backing, "254:0");
	EXPECT_EQ(plain.cache, "254:16");
	EXPECT_TRUE(plain.args.empty());
	EXPECT_EQ(plain.arg("writeback_threshold"), std::nullopt);

	const WbTable t = parse_wb_table("254:0 254:16 4 writeback_threshold 70 read_cache_threshold 31");
	ASSERT_EQ(t.args.size(), 2u);
	EXPECT_EQ(t.arg("writeback_threshold"), 70u);
	EXPECT_EQ(t.arg("read_cache_threshold"), 31u);

	// Upstream repeats the words as typed: any case, a '+', the last of a
	// repeated key wins, words after the counted ones ignored.
	const WbTable typed = parse_wb_table("8:0 8:16 6 Writeback_Threshold +5 NR_MAX_BATCHED_WRITEBACK 4 "
					     "writeback_threshold 9 trailing words");
	EXPECT_EQ(typed.args[0].first, "writeback_threshold");
	EXPECT_EQ(typed.arg("writeback_threshold"), 9u);
	EXPECT_EQ(typed.arg("nr_max_batched_writeback"), 4u);
	EXPECT_EQ(typed.arg("trailing"), std::nullopt);
}

TEST(WbTable, BadTables)
{
	EXPECT_NE(error_of([] { parse_wb_table("254:0"); }).find("backing device and the cache device"),
		  std::string::npos);
	EXPECT_NE(error_of([] { parse_wb_table("254:0 254:16 x"); }).find("count of optional arguments is not a number"),
		  std::string::npos);
	EXPECT_NE(error_of([] { parse_wb_table("254:0 254:16 4 writeback_threshold 1"); }).find("only 2 follow"),
		  std::string::npos);
}

TEST(DmLine, Shapes)
{
	auto named = split_dm_line("wb: 0 2097152 writeboost 1 2 3");
	ASSERT_TRUE(named);
	EXPECT_EQ(named->name, "wb");
	EXPECT_EQ(named->start, 0u);
	EXPECT_EQ(named->length, 2097152u);
	EXPECT_EQ(named->type, "writeboost");
	EXPECT_EQ(named->params, "1 2 3");

	auto plain = split_dm_line("8 100 linear 8:0 0");
	ASSERT_TRUE(plain);
	EXPECT_EQ(plain->name, "");
	EXPECT_EQ(plain->start, 8u);
	EXPECT_EQ(plain->type, "linear");
	EXPECT_EQ(plain->params, "8:0 0");

	// dmsetup prints "<start> <len> <type> " for a target without parameters.
	auto bare = split_dm_line("x: 0 8 error ");
	ASSERT_TRUE(bare);
	EXPECT_EQ(bare->params, "");

	// A name may hold ": ".
	auto odd = split_dm_line("a: b: 0 8 writeboost 254:0 254:1");
	ASSERT_TRUE(odd);
	EXPECT_EQ(odd->name, "a: b");

	EXPECT_FALSE(split_dm_line("hello world"));
	EXPECT_FALSE(split_dm_line("1 2 3 4 5"));
	EXPECT_FALSE(split_dm_line("No devices found"));
	EXPECT_FALSE(split_dm_line(upstream_line)); // bare parameters: read_dmsetup_output takes them
}

TEST(DmsetupOutput, StatusAndTableOfSeveralTargets)
{
	const std::string text = "b1: 0 32768 linear 254:0 0\n"
				 "up: 0 32768 writeboost " +
				 upstream_line + "\n\nwk: 0 32768 writeboost " + wbkit_line +
				 "\n"
				 "wk: 0 32768 writeboost 254:1 254:32 2 writeback_threshold 70\n"
				 "up: 0 32768 writeboost 254:1 254:16\n";
	const auto devices = read_dmsetup_output(text, "x");
	ASSERT_EQ(devices.size(), 2u);
	EXPECT_EQ(devices[0].name, "up");
	EXPECT_EQ(devices[0].length, 32768u);
	EXPECT_EQ(devices[0].status.module(), TargetModule::dm_writeboost);
	ASSERT_TRUE(devices[0].table);
	EXPECT_EQ(devices[0].table->cache, "254:16");
	EXPECT_EQ(devices[1].name, "wk");
	ASSERT_TRUE(devices[1].table);
	EXPECT_EQ(devices[1].table->arg("writeback_threshold"), 70u);
}

TEST(DmsetupOutput, UnnamedLinesAndNothing)
{
	// dmsetup status wb; dmsetup table wb: no names, paired in order.
	auto one = read_dmsetup_output("0 2048 writeboost " + upstream_line + "\n0 2048 writeboost 8:0 8:16\n", "stdin");
	ASSERT_EQ(one.size(), 1u);
	EXPECT_EQ(one[0].name, "stdin:1");
	ASSERT_TRUE(one[0].table);
	EXPECT_EQ(one[0].table->backing, "8:0");
	// The bare parameters, as `cut -d' ' -f4-` leaves them.
	auto bare = read_dmsetup_output("\n" + dead_line + "\n", "f");
	ASSERT_EQ(bare.size(), 1u);
	EXPECT_EQ(bare[0].name, "f:2");
	EXPECT_EQ(bare[0].status.dead(), true);
	EXPECT_FALSE(bare[0].table);
	EXPECT_TRUE(read_dmsetup_output("No devices found\n", "s").empty());
	EXPECT_TRUE(read_dmsetup_output("", "s").empty());
	EXPECT_TRUE(read_dmsetup_output("v: 0 8 linear 8:0 0\n", "s").empty());
}

TEST(DmsetupOutput, ErrorsNameTheLine)
{
	EXPECT_EQ(error_of([] { read_dmsetup_output("v: 0 8 linear 8:0 0\nthis is not dmsetup\n", "in"); }),
		  "in:2: neither a line of dmsetup status or dmsetup table nor a writeboost status: 'this is not "
		  "dmsetup'");
	EXPECT_EQ(error_of([] { read_dmsetup_output("wb: 0 8 writeboost 1 2 3\n", "in"); }),
		  "in:1: writeboost status: a writeboost status has at least 25 fields (24 numbers and a count), this "
		  "one has 3");
	EXPECT_NE(error_of([] { read_dmsetup_output("wb: 0 8 writeboost 254:0\n", "in"); }).find("in:1: writeboost table"),
		  std::string::npos);
	EXPECT_NE(error_of([] { read_dmsetup_output("1 2 3\n", "in"); }).find("in:1: not a writeboost status"),
		  std::string::npos);
	EXPECT_NE(error_of([] { read_dmsetup_output("wb: 0 8 writeboost " + upstream_line + "\nwb: 0 8 writeboost " + upstream_line, "in"); })
			  .find("in:2: a second status line for wb"),
		  std::string::npos);
	EXPECT_NE(error_of([] { read_dmsetup_output("wb: 0 8 writeboost \n", "in"); }).find("without parameters"),
		  std::string::npos);
}

TEST(DmsetupOutput, CapturedFromBothModules)
{
	// dmsetup status and table --target writeboost as scenario 89 captured
	// them: an upstream device, then two dm-wbkit devices, one dead.
	for (const char* tag : {"up", "dead"}) {
		const std::string status = data_file(std::string(tag) + ".status");
		const std::string table = data_file(std::string(tag) + ".table");
		const auto devices = read_dmsetup_output(status + table, tag);
		ASSERT_FALSE(devices.empty()) << tag;
		for (const WbDevice& d : devices) {
			ASSERT_TRUE(d.table) << d.name;
			EXPECT_EQ(d.table->arg("nr_max_batched_writeback"), 16u) << d.name;
			EXPECT_GT(d.status.nr_segments, 0u);
			EXPECT_EQ(d.status.module(),
				  std::string(tag) == "up" ? TargetModule::dm_writeboost : TargetModule::dm_wbkit);
			EXPECT_EQ(d.status.discarded_blocks(), std::nullopt) << d.name; // captured before them
		}
	}
	const auto dead = read_dmsetup_output(data_file("dead.status"), "dead");
	ASSERT_EQ(dead.size(), 2u);
	EXPECT_EQ(dead[0].name, "wbd");
	EXPECT_EQ(dead[0].status.dead(), true);
	EXPECT_EQ(dead[1].status.dead(), false);
}

TEST(WbRates, DeltasOverAnInterval)
{
	WbDevice a;
	a.name = "wb";
	a.status = parse_wb_status(wbkit_line);
	WbDevice b = a;
	b.status.stat[8] += 40;  // write misses
	b.status.stat[12] += 10; // write hits
	b.status.stat[4] += 3;   // read hits
	b.status.stat[0] += 1;   // a read miss
	b.status.last_flushed_id += 2;
	b.status.current_id += 2;
	b.status.last_writeback_id += 7;
	b.status.nr_dirty_cache_blocks -= 100;
	auto r = wb_rates(a, b, 2.0);
	ASSERT_TRUE(r);
	EXPECT_FALSE(r->reset);
	EXPECT_EQ(r->writes, 50u);
	EXPECT_EQ(r->write_hits, 10u);
	EXPECT_EQ(r->reads, 4u);
	EXPECT_EQ(r->read_hits, 3u);
	EXPECT_DOUBLE_EQ(*r->read_hit_ratio, 0.75);
	EXPECT_DOUBLE_EQ(*r->write_hit_ratio, 0.2);
	EXPECT_EQ(r->segments_flushed, 2u);
	EXPECT_EQ(r->segments_written_back, 7u);
	EXPECT_EQ(r->dirty_blocks_change, -100);
	EXPECT_DOUBLE_EQ(r->per_second(r->writes), 25.0);
	EXPECT_DOUBLE_EQ(r->per_second(r->dirty_blocks_change), -50.0);

	// clear_stat: the counters went back.
	WbDevice cleared = b;
	cleared.status.stat = {};
	auto reset = wb_rates(b, cleared, 1.0);
	ASSERT_TRUE(reset);
	EXPECT_TRUE(reset->reset);
	// Another target, or the same name with another cache.
	WbDevice other = b;
	other.name = "wb2";
	EXPECT_FALSE(wb_rates(a, other, 1.0));
	other = b;
	other.status.nr_cache_blocks += 1;
	EXPECT_FALSE(wb_rates(a, other, 1.0));
}

TEST(StatusReport, JsonHumanAndPrometheus)
{
	StatusReport report;
	report.devices = read_dmsetup_output("up: 0 32768 writeboost " + upstream_line + "\nwd: 0 32768 writeboost " +
						     dead_line + "\nwd: 0 32768 writeboost 254:1 254:32 2 nr_read_cache_cells 64\n",
					     "in");
	report.devices[1].dead_cause = "backing read 24000 -5";
	report.source = "in";
	report.time = 1764650000;

	const auto doc = nlohmann::json::parse(status_json(report));
	EXPECT_EQ(doc["schema"], "wbstat/1");
	ASSERT_EQ(doc["devices"].size(), 2u);
	const auto& up = doc["devices"][0];
	EXPECT_EQ(up["target"], "dm-writeboost");
	EXPECT_TRUE(up["dead"].is_null());
	EXPECT_TRUE(up["table"].is_null());
	EXPECT_TRUE(up["tunables"]["nr_max_batched_writeback"].is_null());
	EXPECT_EQ(up["cache"]["dirty_bytes"], 139 * 4096);
	EXPECT_EQ(up["segments"]["in_use"], 11);
	EXPECT_EQ(up["io"]["writes"], 400);
	EXPECT_TRUE(up["io"]["read_hit_ratio"].is_null());
	EXPECT_TRUE(up["rates"].is_null());
	const auto& wd = doc["devices"][1];
	EXPECT_EQ(wd["dead"], true);
	EXPECT_EQ(wd["dead_cause"], "backing read 24000 -5");
	EXPECT_EQ(wd["tunables"]["nr_read_cache_cells"], 64);
	EXPECT_EQ(wd["tunables"]["nr_max_batched_writeback"], 32); // the default: not in the table
	EXPECT_EQ(wd["status"]["pairs"]["dead"], 1);

	std::ostringstream human;
	print_status(human, report);
	EXPECT_NE(human.str().find("up: dm-writeboost, sectors 0+32768 (16.0 MiB)\n"), std::string::npos);
	EXPECT_NE(human.str().find("  dirty      139 block(s), 556.0 KiB (at most), 7.8% of 1778 cache blocks"),
		  std::string::npos);
	EXPECT_NE(human.str().find("  segments   11 of 14 in use (78.6%): current id 21, last flushed 20, last "
				   "written back 10\n"),
		  std::string::npos);
	EXPECT_NE(human.str().find("  state      DEAD: backing read 24000 -5;"), std::string::npos);
	EXPECT_NE(human.str().find("  writes     400, hits 134 (33.5%)"), std::string::npos);

	std::ostringstream prom;
	write_status_prometheus(prom, report);
	const std::string text = prom.str();
	const std::regex sample(R"re([a-z_]+(\{([a-z_]+="([^"\\]|\\.)*",?)*\})? [0-9]+)re");
	std::istringstream lines(text);
	std::string line;
	std::size_t samples = 0;
	while (std::getline(lines, line)) {
		if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0)
			continue;
		EXPECT_TRUE(std::regex_match(line, sample)) << line;
		++samples;
	}
	EXPECT_GT(samples, 40u);
	EXPECT_NE(text.find("writeboost_dirty_blocks{device=\"up\",target=\"dm-writeboost\"} 139\n"), std::string::npos);
	EXPECT_NE(text.find("writeboost_dead{device=\"wd\",target=\"dm-wbkit\"} 1\n"), std::string::npos);
	EXPECT_EQ(text.find("writeboost_dead{device=\"up\""), std::string::npos); // upstream has no dead state
	EXPECT_NE(text.find("writeboost_dead_cause_info{device=\"wd\",target=\"dm-wbkit\",cause=\"backing read 24000 "
			    "-5\"} 1\n"),
		  std::string::npos);
	EXPECT_NE(text.find("writeboost_bios_total{device=\"up\",target=\"dm-writeboost\",op=\"write\",hit=\"1\","
			    "on_buffer=\"1\",full_size=\"1\"} 102\n"),
		  std::string::npos);
	EXPECT_NE(text.find("writeboost_tunable{device=\"wd\",target=\"dm-wbkit\",key=\"nr_read_cache_cells\"} 64\n"),
		  std::string::npos);
	EXPECT_NE(text.find("# TYPE writeboost_bios_total counter\n"), std::string::npos);
}

// The discard counters: figures under cache, a line for people and two
// counters, for dm-wbkit lines that have them; null, said so, and no
// sample for upstream's and an older dm-wbkit's.
TEST(StatusReport, DiscardCountersWhereTheLineHasThem)
{
	StatusReport report;
	report.devices = read_dmsetup_output("up: 0 32768 writeboost " + upstream_line + "\nold: 0 32768 writeboost " +
						     wbkit_line + "\nnew: 0 32768 writeboost " + discard_line + "\n",
					     "in");
	report.source = "in";
	const auto doc = nlohmann::json::parse(status_json(report));
	ASSERT_EQ(doc["devices"].size(), 3u);
	for (std::size_t i : {0, 1}) {
		EXPECT_TRUE(doc["devices"][i]["cache"]["discarded_blocks"].is_null()) << i;
		EXPECT_TRUE(doc["devices"][i]["cache"]["discarded_dirty_blocks"].is_null()) << i;
	}
	const auto& fresh = doc["devices"][2];
	EXPECT_EQ(fresh["cache"]["discarded_blocks"], 300);
	EXPECT_EQ(fresh["cache"]["discarded_dirty_blocks"], 262);
	EXPECT_EQ(fresh["status"]["pairs"]["nr_discarded_blocks"], 300);
	EXPECT_EQ(fresh["status"]["pairs"]["nr_discarded_dirty"], 262);
	EXPECT_EQ(fresh["dead"], false);

	std::ostringstream human;
	print_status(human, report);
	EXPECT_NE(human.str().find("  discarded  not reported (dm-writeboost takes no discards)\n"), std::string::npos);
	EXPECT_NE(human.str().find("  discarded  not reported (a dm-wbkit from before discard support)\n"),
		  std::string::npos);
	EXPECT_NE(human.str().find("  discarded  300 cached block(s) dropped by discards, 262 of them dirty (never "
				   "written back)\n"),
		  std::string::npos);

	std::ostringstream prom;
	write_status_prometheus(prom, report);
	const std::string text = prom.str();
	EXPECT_NE(text.find("# TYPE writeboost_discarded_blocks_total counter\n"), std::string::npos);
	EXPECT_NE(text.find("# TYPE writeboost_discarded_dirty_blocks_total counter\n"), std::string::npos);
	EXPECT_NE(text.find("writeboost_discarded_blocks_total{device=\"new\",target=\"dm-wbkit\"} 300\n"),
		  std::string::npos);
	EXPECT_NE(text.find("writeboost_discarded_dirty_blocks_total{device=\"new\",target=\"dm-wbkit\"} 262\n"),
		  std::string::npos);
	EXPECT_EQ(text.find("writeboost_discarded_blocks_total{device=\"up\""), std::string::npos);
	EXPECT_EQ(text.find("writeboost_discarded_blocks_total{device=\"old\""), std::string::npos);
	EXPECT_EQ(text.find("writeboost_discarded_dirty_blocks_total{device=\"old\""), std::string::npos);
}

TEST(StatusReport, PrometheusLabelsAreEscapedAndUnique)
{
	StatusReport report;
	report.devices = read_dmsetup_output("a\"b\\c: 0 8 writeboost " + upstream_line + "\nm: 0 8 writeboost " +
						     upstream_line + "\nm: 8 8 writeboost " + upstream_line + "\n",
					     "in");
	std::ostringstream prom;
	write_status_prometheus(prom, report);
	EXPECT_NE(prom.str().find("writeboost_segments{device=\"a\\\"b\\\\c\",target=\"dm-writeboost\"} 14\n"),
		  std::string::npos);
	// Two writeboost targets of one device: NAME@START.
	EXPECT_NE(prom.str().find("writeboost_segments{device=\"m@0\","), std::string::npos);
	EXPECT_NE(prom.str().find("writeboost_segments{device=\"m@8\","), std::string::npos);
	EXPECT_NE(prom.str().find("writeboost_devices 3\n"), std::string::npos);
}

namespace {

// dm-wbkit's reply to error_counts after one failed read miss.
const std::string counts_reply = "backing_read 1 backing_write 0 backing_flush 0 cache_read 0 cache_write 0 "
				 "cache_flush 0 cache_read_fallback 0 failed_requests 1 transient 0\n";

WbErrorCounts counts_of(std::vector<std::pair<std::string, std::uint64_t>> pairs)
{
	WbErrorCounts c;
	c.counters = std::move(pairs);
	return c;
}

} // namespace

TEST(ErrorCounts, ReplyInOrderWithUnknownNamesKept)
{
	const WbErrorCounts c = parse_error_counts(counts_reply);
	ASSERT_EQ(c.counters.size(), 9u);
	for (std::size_t i = 0; i < c.counters.size(); ++i)
		EXPECT_EQ(c.counters[i].first, known_error_counters[i].name);
	EXPECT_EQ(c.count("backing_read"), 1u);
	EXPECT_EQ(c.count("failed_requests"), 1u);
	EXPECT_EQ(c.count("transient"), 0u);
	EXPECT_FALSE(c.count("no_such"));

	// A later module's names at the end, a counter beyond 2^63, tabs.
	const WbErrorCounts later =
		parse_error_counts("  backing_read 0\tcache_write 2 new_counter_2 18446744073709551615 Odd_Name 7 \n");
	ASSERT_EQ(later.counters.size(), 4u);
	EXPECT_EQ(later.counters[2], (std::pair<std::string, std::uint64_t>{"new_counter_2", 18446744073709551615u}));
	EXPECT_EQ(later.count("Odd_Name"), 7u);
	EXPECT_EQ(error_counter_effect("cache_write"), ErrorEffect::fatal);
	EXPECT_EQ(error_counter_effect("backing_write"), ErrorEffect::sometimes_fatal);
	EXPECT_EQ(error_counter_effect("transient"), ErrorEffect::not_fatal);
	EXPECT_EQ(error_counter_effect("new_counter_2"), ErrorEffect::unknown);
}

TEST(ErrorCounts, MalformedRepliesAreErrors)
{
	const std::pair<std::string, const char*> bad[] = {
		{"", "an empty reply"},
		{" \n", "an empty reply"},
		{"backing_read", "1 words, not <name> <count> pairs"},
		{"backing_read 1 backing_write", "3 words"},
		{"backing_read -1", "the count of backing_read is not a number: '-1'"},
		{"backing_read +1", "not a number"},
		{"backing_read 0x10", "not a number"},
		{"backing_read 18446744073709551616", "not a number"}, // 2^64
		{"backing_read 1.5", "not a number"},
		{"1 2", "word 1 is not a counter name: '1'"},
		{"2nd 1", "not a counter name"},
		{"backing-read 1", "not a counter name: 'backing-read'"},
		{"a=\"b\" 1", "not a counter name"},
		{"alive", "1 words"},
		{"backing_read 1 backing_read 2", "backing_read is given twice"},
		{"no such message", "3 words"},
		{"dead 1 alive yes", "the count of alive is not a number: 'yes'"},
		{std::string(65, 'a') + " 1", "not a counter name"},
	};
	for (const auto& [reply, why] : bad) {
		const std::string error = error_of([&] { (void)parse_error_counts(reply); });
		EXPECT_NE(error.find(why), std::string::npos) << "'" << reply << "': " << error;
	}
}

TEST(ErrorCounts, SummaryTotalsAndFatalCounters)
{
	const WbErrorSummary quiet = error_summary(parse_error_counts(counts_reply));
	EXPECT_EQ(quiet.backing, 1u);
	EXPECT_EQ(quiet.cache, 0u);
	EXPECT_EQ(quiet.failed_requests, 1u);
	EXPECT_TRUE(quiet.fatal.empty());
	EXPECT_TRUE(quiet.maybe_fatal.empty());
	ASSERT_EQ(quiet.nonzero.size(), 2u);
	EXPECT_EQ(quiet.nonzero[0].first, "backing_read");
	EXPECT_EQ(quiet.nonzero[1].first, "failed_requests");

	// Two clean copies served from the backing device and one dirty read
	// (fatal), a cache write (fatal), a writeback write, an unknown name.
	const WbErrorSummary bad = error_summary(counts_of({{"backing_write", 1},
							    {"cache_read", 3},
							    {"cache_write", 1},
							    {"cache_read_fallback", 2},
							    {"transient", 4},
							    {"later", 5}}));
	EXPECT_EQ(bad.backing, 1u);
	EXPECT_EQ(bad.cache, 4u);
	EXPECT_EQ(bad.transient, 4u);
	EXPECT_EQ(bad.nonzero.size(), 6u);
	EXPECT_EQ(bad.fatal, (std::vector<std::pair<std::string, std::uint64_t>>{{"cache_write", 1}}));
	EXPECT_EQ(bad.maybe_fatal,
		  (std::vector<std::pair<std::string, std::uint64_t>>{{"backing_write", 1}, {"cache_read", 1}}));
	// Every cache read error a clean copy: none of them fatal.
	EXPECT_TRUE(error_summary(counts_of({{"cache_read", 2}, {"cache_read_fallback", 2}})).maybe_fatal.empty());
}

TEST(WbRates, ErrorCountersOverAnInterval)
{
	WbDevice a;
	a.name = "wb";
	a.status = parse_wb_status(wbkit_line);
	a.errors = parse_error_counts(counts_reply);
	WbDevice b = a;
	b.status.stat[0] += 4;
	b.errors = counts_of({{"backing_read", 5}, {"backing_write", 0}, {"failed_requests", 3}, {"brand_new", 9}});
	auto r = wb_rates(a, b, 2.0);
	ASSERT_TRUE(r && r->errors);
	// In the later sample's order; a name the earlier sample lacks is left out.
	EXPECT_EQ(*r->errors, (std::vector<std::pair<std::string, std::uint64_t>>{
				      {"backing_read", 4}, {"backing_write", 0}, {"failed_requests", 2}}));
	EXPECT_DOUBLE_EQ(r->per_second(r->errors->front().second), 2.0);

	// clear_stat leaves the error counters, but the interval is a reset.
	WbDevice cleared = b;
	cleared.status.stat = {};
	auto reset = wb_rates(b, cleared, 1.0);
	ASSERT_TRUE(reset && reset->reset);
	EXPECT_FALSE(reset->errors);
	// A counter that went back (the device was made again), or a sample
	// without counters: not known.
	WbDevice again = b;
	again.status.stat[0] += 1;
	again.errors = counts_of({{"backing_read", 0}, {"failed_requests", 3}});
	r = wb_rates(b, again, 1.0);
	ASSERT_TRUE(r && !r->reset);
	EXPECT_FALSE(r->errors);
	WbDevice none = b;
	none.errors.reset();
	EXPECT_FALSE(wb_rates(a, none, 1.0)->errors);
	EXPECT_FALSE(wb_rates(none, b, 1.0)->errors);
}

TEST(StatusReport, ErrorCountersInJsonHumanAndPrometheus)
{
	StatusReport report;
	report.devices = read_dmsetup_output("up: 0 32768 writeboost " + upstream_line + "\nwk: 0 32768 writeboost " +
						     wbkit_line + "\nwd: 0 32768 writeboost " + dead_line +
						     "\nold: 0 32768 writeboost " + wbkit_line + "\nq: 0 8 writeboost " +
						     wbkit_line + "\n",
					     "in");
	ASSERT_EQ(report.devices.size(), 5u);
	report.devices[1].errors = parse_error_counts(counts_reply + " later_counter 2");
	report.devices[2].dead_cause = "cache write 5120 -5";
	report.devices[2].errors = counts_of({{"backing_read", 0}, {"cache_write", 1}, {"failed_requests", 0}});
	// old: a dm-wbkit without error_counts. q: every counter 0.
	report.devices[4].errors = counts_of({{"backing_read", 0}, {"cache_write", 0}});
	report.time = 1764650000;

	const auto doc = nlohmann::json::parse(status_json(report));
	const auto& devices = doc["devices"];
	EXPECT_TRUE(devices[0]["errors"].is_null());
	EXPECT_TRUE(devices[3]["errors"].is_null());
	ASSERT_TRUE(devices[1]["errors"].is_object());
	EXPECT_EQ(devices[1]["errors"].size(), 10u);
	EXPECT_EQ(devices[1]["errors"]["backing_read"], 1);
	EXPECT_EQ(devices[1]["errors"]["later_counter"], 2);
	// In the order dm-wbkit printed them.
	const std::string text = status_json(report, -1);
	EXPECT_NE(text.find("\"errors\":{\"backing_read\":1,\"backing_write\":0,\"backing_flush\":0,"), std::string::npos);
	EXPECT_EQ(devices[2]["errors"]["cache_write"], 1);

	std::ostringstream human;
	print_status(human, report);
	const std::string h = human.str();
	EXPECT_NE(h.find("up: dm-writeboost, sectors 0+32768 (16.0 MiB)\n  state      not reported (dm-writeboost has no "
			 "dead state)\n  errors     not reported (dm-writeboost has no error counters)\n"),
		  std::string::npos)
		<< h;
	EXPECT_NE(h.find("  errors     backing device 1, cache device 0, failed requests 1, transient 0 since the target "
			 "was made: backing_read 1, failed_requests 1, later_counter 2\n"),
		  std::string::npos)
		<< h;
	EXPECT_NE(h.find("  errors     backing device 0, cache device 1, failed requests 0, transient 0 since the target "
			 "was made: cache_write 1; FATAL: cache_write 1 (every such error makes the target dead)\n"),
		  std::string::npos)
		<< h;
	EXPECT_NE(h.find("old: dm-wbkit, sectors 0+32768 (16.0 MiB)\n  state      alive\n  errors     not known (no "
			 "usable reply to the message error_counts; a dm-wbkit older than it has none)\n"),
		  std::string::npos)
		<< h;
	EXPECT_NE(h.find("  errors     none since the target was made (2 counters at 0)\n"), std::string::npos) << h;

	// A dead target with errors that may have been fatal says so; an
	// alive one with the same counters had none fatal.
	report.devices[2].errors = counts_of({{"backing_write", 2}, {"cache_read", 3}, {"cache_read_fallback", 1}});
	report.devices[1].errors = report.devices[2].errors;
	human.str("");
	print_status(human, report);
	EXPECT_NE(human.str().find("backing_write 2, cache_read 3, cache_read_fallback 1; possibly fatal: "
				   "backing_write 2 (fatal when writing back), cache_read 2 (fatal unless a clean "
				   "copy)\n"),
		  std::string::npos)
		<< human.str();
	EXPECT_NE(human.str().find("backing_write 2, cache_read 3, cache_read_fallback 1\n"), std::string::npos);

	// From a file: not read.
	report.source = "saved.txt";
	human.str("");
	print_status(human, report);
	EXPECT_NE(human.str().find("old: dm-wbkit, sectors 0+32768 (16.0 MiB)\n  state      alive\n  errors     not "
				   "known (not read from dmsetup: the counters are dm-wbkit's reply to the message "
				   "error_counts)\n"),
		  std::string::npos)
		<< human.str();

	report.devices[1].errors = parse_error_counts(counts_reply + " later_counter 2");
	report.devices[2].errors = counts_of({{"backing_read", 0}, {"cache_write", 1}, {"failed_requests", 0}});
	std::ostringstream prom;
	write_status_prometheus(prom, report);
	const std::string p = prom.str();
	EXPECT_NE(p.find("# HELP writeboost_errors_total I/O errors since the target was made, by counter"),
		  std::string::npos);
	EXPECT_NE(p.find("\n# TYPE writeboost_errors_total counter\n"
			 "writeboost_errors_total{device=\"wk\",target=\"dm-wbkit\",counter=\"backing_read\"} 1\n"),
		  std::string::npos)
		<< p;
	EXPECT_NE(p.find("writeboost_errors_total{device=\"wk\",target=\"dm-wbkit\",counter=\"later_counter\"} 2\n"),
		  std::string::npos);
	EXPECT_NE(p.find("writeboost_errors_total{device=\"wd\",target=\"dm-wbkit\",counter=\"cache_write\"} 1\n"),
		  std::string::npos);
	EXPECT_NE(p.find("writeboost_errors_total{device=\"q\",target=\"dm-wbkit\",counter=\"backing_read\"} 0\n"),
		  std::string::npos);
	// No counters, no samples: dm-writeboost, and a dm-wbkit without the message.
	EXPECT_EQ(p.find("writeboost_errors_total{device=\"up\""), std::string::npos);
	EXPECT_EQ(p.find("writeboost_errors_total{device=\"old\""), std::string::npos);
	// No rates: Prometheus computes them from the counter.
	EXPECT_EQ(p.find("errors_per"), std::string::npos);
}

TEST(StatusReport, ErrorRatesInJsonAndHuman)
{
	WbDevice a;
	a.name = "wb";
	a.status = parse_wb_status(wbkit_line);
	a.errors = parse_error_counts(counts_reply);
	WbDevice b = a;
	b.errors = parse_error_counts("backing_read 3 backing_write 0 backing_flush 0 cache_read 0 cache_write 0 "
				      "cache_flush 0 cache_read_fallback 0 failed_requests 3 transient 1");
	StatusReport report{.devices = {b}, .rates = {wb_rates(a, b, 2.0)}, .interval_seconds = 2.0};
	auto doc = nlohmann::json::parse(status_json(report));
	const auto& r = doc["devices"][0]["rates"];
	EXPECT_EQ(r["errors"].size(), 9u);
	EXPECT_EQ(r["errors"]["backing_read"], 2);
	EXPECT_EQ(r["errors"]["cache_write"], 0);
	EXPECT_DOUBLE_EQ(r["errors_per_second"]["backing_read"].get<double>(), 1.0);
	EXPECT_DOUBLE_EQ(r["errors_per_second"]["transient"].get<double>(), 0.5);
	EXPECT_DOUBLE_EQ(r["errors_per_second"]["cache_write"].get<double>(), 0.0);

	std::ostringstream human;
	print_status(human, report);
	EXPECT_NE(human.str().find("\n  errors/s   backing_read 1.0/s, failed_requests 1.0/s, transient 0.5/s\n"),
		  std::string::npos)
		<< human.str();
	// Nothing counted in the interval: no errors/s line.
	report.rates = {wb_rates(a, a, 2.0)};
	human.str("");
	print_status(human, report);
	EXPECT_EQ(human.str().find("errors/s"), std::string::npos);
	doc = nlohmann::json::parse(status_json(report));
	EXPECT_EQ(doc["devices"][0]["rates"]["errors"]["backing_read"], 0);

	// Without counters in either sample, and after a reset: null.
	WbDevice bare = b;
	bare.errors.reset();
	report.rates = {wb_rates(a, bare, 2.0)};
	doc = nlohmann::json::parse(status_json(report));
	EXPECT_TRUE(doc["devices"][0]["rates"]["errors"].is_null());
	EXPECT_TRUE(doc["devices"][0]["rates"]["errors_per_second"].is_null());
	WbDevice cleared = b;
	cleared.status.stat = {};
	report.rates = {wb_rates(b, cleared, 2.0)};
	doc = nlohmann::json::parse(status_json(report));
	EXPECT_TRUE(doc["devices"][0]["rates"]["reset"].get<bool>());
	EXPECT_TRUE(doc["devices"][0]["rates"]["errors"].is_null());
	EXPECT_TRUE(doc["devices"][0]["rates"]["errors_per_second"].is_null());
}
