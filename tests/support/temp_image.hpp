// Sparse image files in a private temporary folder, removed at the end of a test.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

#include "wbkit/device.hpp"

namespace wbkit::testing {

class TempDir {
public:
	TempDir()
	{
		std::string pattern = (std::filesystem::temp_directory_path() / "wbkit-test-XXXXXX").string();
		if (!::mkdtemp(pattern.data()))
			throw std::runtime_error("mkdtemp failed");
		path_ = pattern;
	}
	~TempDir() { std::filesystem::remove_all(path_); }
	TempDir(const TempDir&) = delete;
	TempDir& operator=(const TempDir&) = delete;

	const std::filesystem::path& path() const { return path_; }

	// A zero-filled sparse file of `bytes` bytes.
	std::string make_image(const std::string& name, std::uint64_t bytes) const
	{
		std::string file = (path_ / name).string();
		{
			auto dev = open_device(file, {.writable = true, .create = true});
		}
		std::filesystem::resize_file(file, bytes);
		return file;
	}

	std::unique_ptr<Device> open_rw(const std::string& file) const { return open_device(file, {.writable = true}); }

private:
	std::filesystem::path path_;
};

inline std::vector<std::byte> pattern_bytes(std::size_t size, std::uint64_t seed)
{
	std::mt19937_64 rng(seed);
	std::vector<std::byte> out(size);
	for (auto& b : out)
		b = std::byte(rng() & 0xff);
	return out;
}

} // namespace wbkit::testing
