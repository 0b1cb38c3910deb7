"""The contract every tool keeps: help, usage errors, and bad input that
ends in a clear error and a documented exit code, never a crash or a hang."""
import pytest

from conftest import existing_tools, run, tool_path

USAGE = 2


@pytest.mark.parametrize("tool", existing_tools())
def test_help_exits_zero_and_documents_exit_codes(tool):
    result = run([tool_path(tool), "--help"])
    assert result.returncode == 0, result.stderr
    assert "Usage" in result.stdout or "usage" in result.stdout.lower()
    assert "exit" in result.stdout.lower()


@pytest.mark.parametrize("tool", existing_tools())
def test_unknown_option_is_a_usage_error(tool):
    result = run([tool_path(tool), "--no-such-option"])
    assert result.returncode == USAGE
    assert result.stderr.startswith(f"{tool}: error:")


@pytest.mark.parametrize("tool", existing_tools())
def test_no_arguments_is_a_usage_error(tool):
    result = run([tool_path(tool)])
    assert result.returncode == USAGE
    assert result.stderr.startswith(f"{tool}: error:")
