// kafkajs behind the JSON-lines contract of compat_tests/contract.py: one request per stdin
// line, one answer per stdout line. Usage: node driver.js BOOTSTRAP
//
// kafkajs's Consumer only works inside a consumer group, so consumers on assigned partitions
// read with kafkajs's own Fetch request, record decoder and Batch (the consumer's filtering of
// control records and aborted transactions) through the client's cluster object (the wire code
// its Consumer uses, without the group); their commits go through the admin.
// Records are placed by kafkajs's DefaultPartitioner (murmur2) before one send, so that each
// record's partition and offset are known.
'use strict'

const readline = require('readline')
const { Kafka, CompressionTypes, CompressionCodecs, Partitioners, ConfigResourceTypes, logLevel } = require('kafkajs')
const Batch = require('kafkajs/src/consumer/batch')  // not exported: the consumer's filtering
const snappy = require('snappyjs')
const lz4 = require('lz4js')
const { compressFrame: lz4Frame } = require('./lz4frame')
const zstd = require('@bokuweb/zstd-wasm')

const CODECS = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP,
  snappy: CompressionTypes.Snappy, lz4: CompressionTypes.LZ4, zstd: CompressionTypes.ZSTD }
const READ_COMMITTED = 1

// kafkajs ships gzip only; the others are plug-ins, here pure JS / WebAssembly (no native build)
CompressionCodecs[CompressionTypes.Snappy] = () => ({
  compress: async encoder => Buffer.from(snappy.compress(encoder.buffer)),
  decompress: async buffer => Buffer.from(snappy.uncompress(buffer)),
})
CompressionCodecs[CompressionTypes.LZ4] = () => ({
  compress: async encoder => lz4Frame(encoder.buffer),  // independent blocks: see lz4frame.js
  decompress: async buffer => Buffer.from(lz4.decompress(buffer)),  // any frame, dependent too
})
CompressionCodecs[CompressionTypes.ZSTD] = () => ({
  compress: async encoder => Buffer.from(zstd.compress(encoder.buffer, 3)),
  decompress: async buffer => Buffer.from(zstd.decompress(buffer)),
})

const [bootstrap] = process.argv.slice(2)
// COMMITGATE_COMPAT_CLIENT_SETTINGS: a JSON file merged into the configuration (ssl, sasl)
const settingsFile = process.env.COMMITGATE_COMPAT_CLIENT_SETTINGS
const settings = settingsFile ? JSON.parse(require('fs').readFileSync(settingsFile, 'utf8')) : {}
const kafka = new Kafka({ clientId: 'commitgate-compat', brokers: [bootstrap], logLevel: logLevel.NOTHING, ...settings })
const admin = kafka.admin()
const consumers = new Map()
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))
const hex = b => (b === null || b === undefined ? null : Buffer.from(b).toString('hex'))
const bytes = h => (h === null ? null : Buffer.from(h, 'hex'))

function recordOut (partition, m) {
  const headers = []
  for (const [k, v] of Object.entries(m.headers || {})) {
    for (const one of Array.isArray(v) ? v : [v]) headers.push([k, hex(one)])
  }
  return { partition, offset: Number(m.offset), timestamp: Number(m.timestamp), key: hex(m.key), value: hex(m.value), headers }
}

function messageIn (r) {
  const headers = {}
  for (const [k, v] of r.headers) {  // a name given twice becomes an array: two headers
    headers[k] = k in headers ? [].concat(headers[k], bytes(v)) : bytes(v)
  }
  const m = { key: bytes(r.key), value: bytes(r.value), headers }
  if (r.timestamp !== null) m.timestamp = String(r.timestamp)
  if (r.partition !== null) m.partition = r.partition
  return m
}

// A cluster built by the client the way its consumer builds one (the factory is private).
function clusterOf (client) {
  const symbol = Object.getOwnPropertySymbols(client).find(s => s.description === 'private:Kafka:createCluster')
  return client[symbol]({})
}

async function partitionsOf (topic) {
  try {
    const { topics: [t] } = await admin.fetchTopicMetadata({ topics: [topic] })
    return t.partitions
  } catch (e) {
    return null  // not there yet: the producer's metadata request creates it
  }
}

async function produce ({ topic, records, config }) {
  const transactional = !!config.transactional_id
  const producer = kafka.producer({
    idempotent: !!config.idempotent || transactional, transactionalId: config.transactional_id || undefined,
    maxInFlightRequests: config.idempotent || transactional ? 1 : undefined,
    createPartitioner: Partitioners.DefaultPartitioner,
  })
  await producer.connect()
  try {
    const messages = records.map(messageIn)
    const partitionMetadata = await partitionsOf(topic)
    if (partitionMetadata !== null) {
      const partitioner = Partitioners.DefaultPartitioner()
      for (const m of messages) {
        if (m.partition === undefined) m.partition = partitioner({ topic, partitionMetadata, message: m })
      }
    }
    const target = transactional ? await producer.transaction() : producer
    const acks = config.acks === null || config.acks === undefined ? -1 : (config.acks === 'all' ? -1 : Number(config.acks))
    const compression = CODECS[config.compression || 'none']
    const sends = partitionMetadata === null ? messages.map(m => [m]) : [messages]
    const metas = []
    for (const batch of sends) metas.push(...await target.send({ topic, messages: batch, acks, compression }))
    if (transactional) await (config.abort ? target.abort() : target.commit())
    const next = {}  // per partition: the offset of its next record
    for (const meta of metas) next[meta.partition] = Number(meta.baseOffset)
    const sent = messages.map(m => {
      const partition = m.partition === undefined ? 0 : m.partition
      if (!(partition in next)) return { partition, offset: -1 }  // acks=0: no answer
      return { partition, offset: next[partition]++ }
    })
    return { sent }
  } finally {
    await producer.disconnect()
  }
}

// ---- consumers on assigned partitions: fetch through the cluster, commit through the admin ----

async function openAssigned ({ name, topic, partitions, group, start, read_committed: readCommitted }) {
  const offsets = {}
  const ranges = await admin.fetchTopicOffsets(topic)
  let found = {}
  if (start !== null && typeof start === 'object') {
    for (const p of await admin.fetchTopicOffsetsByTimestamp(topic, start.timestamp)) found[p.partition] = p.offset
  } else if (start === 'committed') {
    const [committed] = await admin.fetchOffsets({ groupId: group, topics: [topic] })
    for (const p of committed.partitions) if (Number(p.offset) >= 0) found[p.partition] = p.offset
  }
  for (const p of partitions) {
    const range = ranges.find(r => r.partition === p)
    if (typeof start === 'number') offsets[p] = start
    else if (start === 'latest') offsets[p] = Number(range.high)
    else offsets[p] = Number(p in found ? found[p] : range.low)
  }
  const cluster = clusterOf(kafka)
  await cluster.connect()
  await cluster.addTargetTopic(topic)
  consumers.set(name, { topic, group, offsets, cluster, readCommitted, assignment: partitions })
  return { positions: Object.fromEntries(Object.entries(offsets).map(([p, o]) => [p, o])) }
}

async function pollAssigned (c, count, maxMs) {
  const out = []
  const deadline = Date.now() + maxMs
  while (out.length < count && Date.now() < deadline) {
    const leaders = c.cluster.findLeaderForPartitions(c.topic, c.assignment)
    for (const [nodeId, partitions] of Object.entries(leaders)) {
      const broker = await c.cluster.findBroker({ nodeId })
      const response = await broker.fetch({
        maxWaitTime: 100, isolationLevel: c.readCommitted ? READ_COMMITTED : 0,
        topics: [{ topic: c.topic, partitions: partitions.map(p => ({ partition: p, fetchOffset: String(c.offsets[p]), maxBytes: 16 << 20 })) }],
      })
      for (const { partitions: parts } of response.responses) {
        for (const part of parts) {
          // the consumer's own batch: drops records before the fetch offset, control records
          // and, with read_committed, records of the aborted transactions the response lists
          const batch = new Batch(c.topic, String(c.offsets[part.partition]), part)
          out.push(...batch.messages.map(m => recordOut(part.partition, m)))
          if (!batch.isEmptyIncludingFiltered()) c.offsets[part.partition] = Number(batch.lastOffset()) + 1
        }
      }
    }
  }
  return out
}

// ---- group members: consumer.run feeds a buffer that polls take from -------------------------

async function openMember ({ name, topic, group }) {
  const consumer = kafka.consumer({ groupId: group })
  const member = { topic, consumer, buffer: [], returned: {}, assignment: [] }
  consumer.on(consumer.events.GROUP_JOIN, e => { member.assignment = (e.payload.memberAssignment[topic] || []).slice().sort() })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  await consumer.run({ autoCommit: false, eachMessage: async ({ partition, message }) => { member.buffer.push(recordOut(partition, message)) } })
  consumers.set(name, member)
  return { positions: {} }
}

async function poll ({ name, count, max_ms: maxMs }) {
  const c = consumers.get(name)
  if (!c.consumer) return { records: await pollAssigned(c, count, maxMs), assignment: c.assignment }
  const deadline = Date.now() + maxMs
  while (c.buffer.length < count && Date.now() < deadline) await sleep(20)
  const records = c.buffer.splice(0, count)
  for (const r of records) c.returned[r.partition] = r.offset + 1
  return { records, assignment: c.assignment }
}

// offsets: {partition: offset} to commit, or null for the consumer's position
async function commit ({ name, offsets }) {
  const c = consumers.get(name)
  const chosen = offsets ?? (c.consumer ? c.returned : c.offsets)
  const partitions = Object.entries(chosen).map(([p, o]) => ({ topic: c.topic, partition: Number(p), offset: String(o) }))
  if (c.consumer) await c.consumer.commitOffsets(partitions)
  else await admin.setOffsets({ groupId: c.group, topic: c.topic, partitions })
  return { committed: chosen }
}

async function close ({ name }) {
  const c = consumers.get(name)
  consumers.delete(name)
  await (c.consumer ? c.consumer.disconnect() : c.cluster.disconnect())
  return {}
}

// ---- admin ----------------------------------------------------------------------------------

const ops = {
  hello: async () => ({ client: 'kafkajs', version: require('kafkajs/package.json').version }),
  metadata: async ({ topic }) => {
    const { topics: [t] } = await admin.fetchTopicMetadata({ topics: [topic] })
    const { brokers } = await admin.describeCluster()
    return { partitions: t.partitions.map(p => p.partitionId).sort((a, b) => a - b), brokers: brokers.length }
  },
  create_topic: async ({ topic, partitions, configs }) => {
    const configEntries = Object.entries(configs).map(([name, value]) => ({ name, value }))
    await admin.createTopics({ topics: [{ topic, numPartitions: partitions, configEntries }], waitForLeaders: true })
    return {}
  },
  delete_topic: async ({ topic }) => { await admin.deleteTopics({ topics: [topic] }); return {} },
  list_topics: async () => ({ topics: await admin.listTopics() }),
  describe_configs: async ({ topic }) => {
    const { resources: [r] } = await admin.describeConfigs({ resources: [{ type: ConfigResourceTypes.TOPIC, name: topic }], includeSynonyms: false })
    return { configs: Object.fromEntries(r.configEntries.map(e => [e.configName, e.configValue])) }
  },
  alter_config: async ({ topic, name, value }) => {
    await admin.alterConfigs({ resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configEntries: [{ name, value }] }] })
    return {}
  },
  create_partitions: async ({ topic, total }) => { await admin.createPartitions({ topicPartitions: [{ topic, count: total }] }); return {} },
  delete_records: async ({ topic, partition, offset }) => {
    // kafkajs looks the leader up in the metadata it already holds: fetch the topic's first
    await admin.fetchTopicMetadata({ topics: [topic] })
    await admin.deleteTopicRecords({ topic, partitions: [{ partition, offset: String(offset) }] })
    return {}
  },
  produce,
  consumer_open: async r => (r.partitions === null ? openMember(r) : openAssigned(r)),
  poll,
  commit,
  consumer_close: close,
}

async function main () {
  await zstd.init()
  await admin.connect()
  const lines = readline.createInterface({ input: process.stdin })
  for await (const line of lines) {
    if (!line.trim()) continue
    const { op, ...request } = JSON.parse(line)
    let answer
    try {
      answer = { ok: await ops[op](request) }
    } catch (e) {
      answer = { error: `${e.name || 'Error'}: ${e.message}\n${e.stack || ''}` }
    }
    process.stdout.write(JSON.stringify(answer) + '\n')
  }
  for (const name of [...consumers.keys()]) await close({ name })
  await admin.disconnect()
}

main().then(() => process.exit(0), e => { console.error(e); process.exit(1) })
