// kafkajs against a broker given by address: runs every scenario of
// tests/gateway/client_scenarios.py and prints one JSON line per scenario with what was sent and
// what was read back. The Python test judges the lines; this driver only reports.
// Usage: node driver.js BOOTSTRAP TOPIC_PREFIX
//
// kafkajs's Consumer only works inside a consumer group (FindCoordinator/JoinGroup, a later
// issue), so records are read with kafkajs's own Fetch request and record decoder through the
// client's cluster object: the same wire code its Consumer uses, without the group.
'use strict'

const crypto = require('crypto')
const { Kafka, CompressionTypes, CompressionCodecs, logLevel } = require('kafkajs')
const snappy = require('snappyjs')
const lz4 = require('lz4js')
const zstd = require('@bokuweb/zstd-wasm')

const CODECS = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP,
  snappy: CompressionTypes.Snappy, lz4: CompressionTypes.LZ4, zstd: CompressionTypes.ZSTD }
const LARGE_BYTES = 5 * 1024 * 1024
const LARGE_TOPIC_MAX = String(8 * 1024 * 1024)
const BASE_TS = 1000000
const MIDDLE = 25
const CONSUME_DEADLINE_MS = 30000

// kafkajs ships gzip only; the others are plug-ins, here pure JS / WebAssembly (no native build)
CompressionCodecs[CompressionTypes.Snappy] = () => ({
  compress: async encoder => Buffer.from(snappy.compress(encoder.buffer)),
  decompress: async buffer => Buffer.from(snappy.uncompress(buffer)),
})
CompressionCodecs[CompressionTypes.LZ4] = () => ({
  compress: async encoder => Buffer.from(lz4.compress(encoder.buffer)),
  decompress: async buffer => Buffer.from(lz4.decompress(buffer)),
})
CompressionCodecs[CompressionTypes.ZSTD] = () => ({
  compress: async encoder => Buffer.from(zstd.compress(encoder.buffer, 3)),
  decompress: async buffer => Buffer.from(zstd.decompress(buffer)),
})

const [bootstrap, prefix] = process.argv.slice(2)
const kafka = new Kafka({ clientId: 'commitgate-kafkajs', brokers: [bootstrap], logLevel: logLevel.NOTHING })
const admin = kafka.admin()

const hex = b => (b === null || b === undefined ? null : Buffer.from(b).toString('hex'))
const sha256 = b => crypto.createHash('sha256').update(b).digest('hex')

function describe (partition, offset, m) {
  const headers = Object.entries(m.headers || {}).map(([k, v]) => [k, hex(v)])
  return { partition, offset: Number(offset), key: hex(m.key), value: hex(m.value), headers }
}

async function create (name, partitions, configs = {}) {
  const topic = `${prefix}-${name}`
  const configEntries = Object.entries(configs).map(([name, value]) => ({ name, value }))
  await admin.createTopics({ topics: [{ topic, numPartitions: partitions, configEntries }], waitForLeaders: true })
  return topic
}

async function produce (topic, messages, options = {}, producerOptions = {}) {
  const producer = kafka.producer(producerOptions)
  await producer.connect()
  try {
    const sent = []
    for (const m of messages) {
      // one send per record, so each record's partition and offset are known
      const [meta] = await producer.send({ topic, messages: [m], ...options })
      sent.push(describe(meta ? meta.partition : 0, meta ? meta.baseOffset : -1, m))  // acks=0: no answer
    }
    return sent
  } finally {
    await producer.disconnect()
  }
}

async function produceBatch (topic, messages, options = {}, producerOptions = {}) {
  const producer = kafka.producer(producerOptions)
  await producer.connect()
  try {
    await producer.send({ topic, messages, ...options })
  } finally {
    await producer.disconnect()
  }
}

// A cluster built by the client the way its consumer builds one (the factory is private).
function clusterOf (client) {
  const symbol = Object.getOwnPropertySymbols(client)
    .find(s => s.description === 'private:Kafka:createCluster')
  return client[symbol]({})
}

// Fetch from `offsets` ({partition: offset}) until `expected` records arrived (bounded).
async function fetchRecords (topic, offsets, expected) {
  const cluster = clusterOf(kafka)
  await cluster.connect()
  try {
    await cluster.addTargetTopic(topic)
    const out = []
    const deadline = Date.now() + CONSUME_DEADLINE_MS
    while (out.length < expected && Date.now() < deadline) {
      const leaders = cluster.findLeaderForPartitions(topic, Object.keys(offsets).map(Number))
      for (const [nodeId, partitions] of Object.entries(leaders)) {
        const broker = await cluster.findBroker({ nodeId })
        const response = await broker.fetch({
          maxWaitTime: 200,
          topics: [{ topic, partitions: partitions.map(p => ({ partition: p, fetchOffset: String(offsets[p]), maxBytes: 1048576 })) }],
        })
        for (const { partitions: parts } of response.responses) {
          for (const part of parts) {
            for (const m of part.messages) {
              if (Number(m.offset) < offsets[part.partition]) continue  // fetch began mid-batch
              out.push(describe(part.partition, m.offset, m))
              offsets[part.partition] = Number(m.offset) + 1
            }
          }
        }
      }
    }
    return out
  } finally {
    await cluster.disconnect()
  }
}

// Where a consumer with auto.offset.reset=latest starts (ListOffsets LATEST, as its consumer asks).
async function latestOffset (topic) {
  const cluster = clusterOf(kafka)
  await cluster.connect()
  try {
    await cluster.addTargetTopic(topic)
    const [{ partitions: [latest] }] = await cluster.fetchTopicsOffset([{ topic, fromBeginning: false, partitions: [{ partition: 0 }] }])
    return Number(latest.offset)
  } finally {
    await cluster.disconnect()
  }
}

const fromZero = partitions => Object.fromEntries([...Array(partitions).keys()].map(p => [p, 0]))

async function roundTrip (topic, partitions, messages, options, producerOptions) {
  const sent = await produce(topic, messages, options, producerOptions)
  return { topic, sent, received: await fetchRecords(topic, fromZero(partitions), messages.length) }
}

// ---- scenarios ------------------------------------------------------------------------------

async function codec (name) {
  const topic = await create(`codec-${name}`, 1)
  const messages = [...Array(50).keys()].map(i => ({
    key: Buffer.from(`key-${i}`), value: Buffer.alloc(i * 37 % 2000, i % 251),
    headers: { h: Buffer.from(String(i)), i: Buffer.from('x') },
  }))
  const producer = kafka.producer()
  await producer.connect()
  const metas = await producer.send({ topic, messages, compression: CODECS[name] })  // one batch
  await producer.disconnect()
  const base = Number(metas[0].baseOffset)
  const sent = messages.map((m, i) => describe(metas[0].partition, base + i, m))
  const received = await fetchRecords(topic, fromZero(1), messages.length)
  // inside the batch: the broker returns the whole batch, the reader skips what precedes
  const fromMiddle = await fetchRecords(topic, { 0: MIDDLE }, messages.length - MIDDLE)
  return { topic, sent, received, from_middle: fromMiddle.map(r => r.offset) }
}

async function logAppendTime () {
  const topic = await create('log-append-time', 1, { 'message.timestamp.type': 'LogAppendTime' })
  const messages = [...Array(5).keys()].map(i => ({ value: Buffer.from(`lat-${i}`), timestamp: String(BASE_TS + i) }))
  await produceBatch(topic, messages, { compression: CompressionTypes.GZIP })
  const cluster = clusterOf(kafka)
  await cluster.connect()
  try {
    await cluster.addTargetTopic(topic)
    const [nodeId] = Object.keys(cluster.findLeaderForPartitions(topic, [0]))
    const broker = await cluster.findBroker({ nodeId })
    const response = await broker.fetch({ maxWaitTime: 200, topics: [{ topic, partitions: [{ partition: 0, fetchOffset: '0', maxBytes: 1048576 }] }] })
    const records = response.responses[0].partitions[0].messages
    // kafkajs applies the batch's timestamp type without reporting it
    return { topic, timestamps: records.map(m => Number(m.timestamp)), log_append_time: records.map(() => null) }
  } finally {
    await cluster.disconnect()
  }
}

async function autoCreate () {
  const topic = `${prefix}-auto-created`  // not created: the producer's metadata creates it
  const messages = [0, 1, 2].map(i => ({ value: Buffer.from(`auto-${i}`) }))
  return roundTrip(topic, 1, messages)
}

async function keys () {
  const topic = await create('keys', 4)
  const messages = [...Array(40).keys()].map(i => ({ key: Buffer.from(`k-${i}`), value: Buffer.from(`v-${i}`) }))
  return { ...await roundTrip(topic, 4, messages), partitions: 4 }
}

async function nulls () {
  const topic = await create('nulls', 1)
  const messages = [
    { key: null, value: Buffer.from('v') },
    { key: Buffer.from('k'), value: null },
    { key: null, value: null },
    { key: Buffer.from('k2'), value: Buffer.alloc(0), headers: { empty: Buffer.alloc(0) } },
  ]
  return roundTrip(topic, 1, messages)
}

function largeValue () {
  const value = Buffer.alloc(LARGE_BYTES)
  for (let i = 0; i < value.length; i++) value[i] = (i * 31 + Math.floor(i / 4096)) & 0xff
  return value
}

async function large () {
  const topic = await create('large', 1, { 'max.message.bytes': LARGE_TOPIC_MAX })
  const value = largeValue()
  const [sent] = await produce(topic, [{ value }])
  const [got] = await fetchRecords(topic, fromZero(1), 1)
  const read = got ? Buffer.from(got.value, 'hex') : Buffer.alloc(0)
  return { topic, offset: sent.offset, sent_sha256: sha256(value), sent_size: value.length,
    received_sha256: sha256(read), received_size: read.length }
}

async function tooLarge () {
  const topic = await create('too-large', 1)
  try {
    await produceBatch(topic, [{ value: largeValue() }], {}, { retry: { retries: 0 } })
    return { topic, refused: null }
  } catch (e) {
    return { topic, refused: e.type || e.name }
  }
}

async function offsets () {
  const topic = await create('offsets', 1)
  const old = [...Array(5).keys()].map(i => ({ value: Buffer.from(`old-${i}`), timestamp: String(BASE_TS + i * 1000) }))
  await produce(topic, old)
  const latestPosition = await latestOffset(topic)
  const fresh = [5, 6, 7].map(i => ({ value: Buffer.from(`new-${i}`), timestamp: String(BASE_TS + i * 1000) }))
  await produce(topic, fresh)
  const latestReceived = (await fetchRecords(topic, { 0: latestPosition }, 3)).map(r => r.offset)
  const earliestReceived = (await fetchRecords(topic, fromZero(1), 8)).map(r => r.offset)
  const byTime = []
  for (const query of [0, BASE_TS + 4500, BASE_TS + 7000, BASE_TS + 99000]) {
    const [found] = await admin.fetchTopicOffsetsByTimestamp(topic, query)
    // kafkajs answers "no such record" with the log end offset rather than null
    byTime.push({ query, offset: Number(found.offset), timestamp: null })
  }
  const [range] = await admin.fetchTopicOffsets(topic)
  return { topic, latest_position: latestPosition, latest_received: latestReceived,
    earliest_received: earliestReceived, by_time: byTime, beginning: Number(range.low), end: Number(range.high) }
}

async function acks () {
  const topic = await create('acks', 1)
  const sent = []
  for (const [acks, label] of [[0, '0'], [1, '1'], [-1, 'all']]) {
    const messages = [...Array(10).keys()].map(i => ({ key: Buffer.from(`acks-${label}`), value: Buffer.from(`${label}-${i}`) }))
    const producerOptions = acks === -1 ? { idempotent: true } : {}
    sent.push(...await produce(topic, messages, { acks }, producerOptions))
  }
  return { topic, sent, received: await fetchRecords(topic, fromZero(1), 30) }
}

async function idempotent () {
  const topic = await create('idempotent', 1)
  const messages = [...Array(100).keys()].map(i => ({ key: Buffer.from(`id-${i}`), value: Buffer.from(`value-${i}`) }))
  // kafkajs is not idempotent by default: it has to be asked
  return roundTrip(topic, 1, messages, {}, { idempotent: true, maxInFlightRequests: 1 })
}

async function run (scenario, body) {
  let out
  try {
    out = await body()
  } catch (e) {
    out = { error: String(e && e.stack ? e.stack : e) }
  }
  process.stdout.write(JSON.stringify({ scenario, ...out }) + '\n')
}

async function main () {
  await zstd.init()
  await admin.connect()
  for (const name of Object.keys(CODECS)) await run(`codec-${name}`, () => codec(name))
  await run('keys', keys)
  await run('nulls', nulls)
  await run('large', large)
  await run('too-large', tooLarge)
  await run('offsets', offsets)
  await run('acks', acks)
  await run('idempotent', idempotent)
  await run('auto-create', autoCreate)
  await run('log-append-time', logAppendTime)
  await admin.disconnect()
}

main().then(() => process.exit(0), e => { console.error(e); process.exit(1) })
