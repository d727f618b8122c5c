// LZ4 frames as Kafka reads them, written with lz4js's block compressor.
//
// Kafka's LogValidator (and so CommitGate) refuses frames whose blocks depend on earlier ones
// (block-independence flag clear), and lz4js.compress writes exactly those: one hash table
// across its blocks and an FLG without the flag. Here each 64 KiB block is compressed alone
// (a fresh hash table: no match reaches into an earlier block) under an FLG that says so.
'use strict'

const lz4 = require('lz4js')
const xxh32 = require('lz4js/xxh32.js').hash

const MAGIC = [0x04, 0x22, 0x4d, 0x18]
const FLG = 0x60  // version 1, independent blocks; no checksums, no content size, no dictionary
const BD = 0x40  // blocks of at most 64 KiB
const BLOCK = 64 << 10
const RAW = 0x80000000  // a block size's high bit: the block is stored as is
// LZ4's block format: the last match starts 12 bytes or more before the block's end (decoders
// read the bytes before it as the block's final literals). lz4js's compressBlock may start one
// 10 or 11 bytes before it; liblz4 (librdkafka, python-lz4) and lz4-java refuse such a block.
const MATCH_END_MARGIN = 12
const MIN_MATCH = 4

function compressFrame (data) {
  const header = Buffer.from([...MAGIC, FLG, BD, 0])
  header[6] = (xxh32(0, header, 4, 2) >>> 8) & 0xff  // HC: second byte of xxh32(FLG, BD)
  const parts = [header]
  const table = new Uint32Array(1 << 16)  // lz4js's hash table: 16-bit hashes
  const packed = Buffer.alloc(lz4.compressBound(BLOCK))
  for (let start = 0; start < data.length; start += BLOCK) {
    const size = Math.min(BLOCK, data.length - start)
    table.fill(0)
    const length = lz4.compressBlock(data, packed, start, size, table)
    const compressed = length > 0 && length < size &&
      lastMatchStart(packed, length) <= size - MATCH_END_MARGIN
    parts.push(blockSize(compressed ? length : (RAW | size) >>> 0),
      compressed ? Buffer.from(packed.subarray(0, length)) : data.subarray(start, start + size))
  }
  parts.push(blockSize(0))  // end mark
  return Buffer.concat(parts)
}

function blockSize (value) {
  const field = Buffer.alloc(4)
  field.writeUInt32LE(value)
  return field
}

// Where the block's last match starts in its decompressed bytes (-1 when it has none).
function lastMatchStart (packed, length) {
  let at = 0
  let out = 0
  let last = -1
  for (;;) {
    const token = packed[at++]
    let literals = token >> 4
    if (literals === 15) for (let b = 255; b === 255; literals += b) b = packed[at++]
    at += literals
    out += literals
    if (at >= length) return last  // the final sequence: literals only
    last = out
    at += 2  // the match's offset
    let match = token & 15
    if (match === 15) for (let b = 255; b === 255; match += b) b = packed[at++]
    out += match + MIN_MATCH
  }
}

module.exports = { compressFrame }
