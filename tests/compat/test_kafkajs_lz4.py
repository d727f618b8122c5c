"""The kafkajs driver's LZ4 codec (compat_tests/drivers/kafkajs/lz4frame.js): its frames are
ones Kafka accepts (independent blocks, a correct header checksum, blocks liblz4 decodes), and
its decompression still reads the frames other clients write (linked blocks, content size and
checksum; not block checksums, which lz4js misreads and Kafka's clients do not write)."""
from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

import lz4.frame
import pytest

from commitgate.compat_tests.clients import CLIENTS, DRIVERS, Unavailable
from commitgate.protocol.decompress import pieces
from commitgate.protocol.record_batch import CODECS

NODE_TIMEOUT_S = 120
FLG_INDEPENDENT_V1 = 0x60
BD_64_KIB = 0x40
# each (op, bytes) runs through the driver's codec: compress with lz4frame, decompress with lz4js
CODEC_PROGRAM = """
const { compressFrame } = require('./lz4frame')
const lz4 = require('lz4js')
const run = ([op, hex]) => {
  const data = Buffer.from(hex, 'hex')
  return Buffer.from(op === 'compress' ? compressFrame(data) : lz4.decompress(data)).toString('hex')
}
process.stdout.write(JSON.stringify(JSON.parse(require('fs').readFileSync(0, 'utf8')).map(run)))
"""


def _end_rule_block() -> bytes:
    """A full 64 KiB block whose last match lz4js starts 10 bytes before its end (a run, six
    bytes that match nothing, then the run again): liblz4 refuses such a block."""
    block = bytearray(b"a" * 65536)
    block[65520:65526] = bytes(range(1, 7))
    return bytes(block)


SAMPLES = {
    "empty": b"",
    "tiny": b"0123456789",
    "records": b"key-0\x00value-0\x01" * 40,
    "end-rule": _end_rule_block(),
    # one random chunk repeated across 64 KiB blocks: a shared hash table would match back
    # into the block before
    "repeats": random.Random(7).randbytes(10_000) * 20,
    "random": random.Random(8).randbytes(150_000),
}


@pytest.fixture(scope="module")
def node_command() -> list[str]:
    [kafkajs] = [c for c in CLIENTS if c.name == "kafkajs"]
    try:
        command = kafkajs.prepare(Path("."))("unused")  # runs npm ci once per lock file
    except Unavailable as exc:
        pytest.skip(str(exc))
    return [command[0], "-e", CODEC_PROGRAM]


def _run(node_command: list[str], jobs: list[tuple[str, bytes]]) -> list[bytes]:
    done = subprocess.run(node_command, cwd=DRIVERS / "kafkajs", capture_output=True, check=True,
                          input=json.dumps([[op, data.hex()] for op, data in jobs]).encode(),
                          timeout=NODE_TIMEOUT_S)
    return [bytes.fromhex(h) for h in json.loads(done.stdout)]


@pytest.fixture(scope="module")
def frames(node_command) -> dict[str, bytes]:
    out = _run(node_command, [("compress", data) for data in SAMPLES.values()])
    return dict(zip(SAMPLES, out))


@pytest.mark.parametrize("name", SAMPLES)
def test_frame_has_independent_blocks_and_decodes(frames, name):
    frame = frames[name]
    assert frame[4] == FLG_INDEPENDENT_V1 and frame[5] == BD_64_KIB
    # liblz4 checks the header checksum and, blocks being independent, decodes each alone
    assert lz4.frame.decompress(frame) == SAMPLES[name]
    assert b"".join(pieces(CODECS["lz4"], memoryview(frame), 1 << 30)) == SAMPLES[name]


def test_frames_shrink_where_data_repeats(frames):
    assert len(frames["repeats"]) < len(SAMPLES["repeats"]) // 2
    assert len(frames["random"]) <= len(SAMPLES["random"]) + 64  # stored raw, not grown


@pytest.mark.parametrize("linked", [True, False])
@pytest.mark.parametrize("described", [True, False])  # content size and checksum, or neither
def test_decompression_reads_other_clients_frames(node_command, linked, described):
    data = SAMPLES["repeats"] + SAMPLES["records"]
    frame = lz4.frame.compress(data, block_linked=linked, content_checksum=described,
                               store_size=described)
    assert _run(node_command, [("decompress", frame)]) == [data]
