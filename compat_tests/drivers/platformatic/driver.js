// @platformatic/kafka behind the JSON-lines contract of compat_tests/contract.py: one request per
// stdin line, one answer per stdout line. Usage: node driver.js BOOTSTRAP
//
// The library's Consumer.consume always joins its group, so consumers on assigned partitions
// read with the Consumer's public fetch (Fetch v13+ by topic id, the library's own record
// decoder) and commit through the Admin, as the kafkajs driver does. Group members read a
// consume() stream into a buffer that polls take from. Each send is one Produce request: one
// batch per partition, whose base offset gives every record's offset.
import { readFileSync } from 'node:fs'
import readline from 'node:readline'
import {
  Admin, Consumer, Producer, ConfigResourceTypes, IncrementalAlterConfigOperationTypes,
  FetchIsolationLevels, ListOffsetTimestamps, MessagesStreamModes, MessagesStreamFallbackModes,
  ProduceAcks, compatibilityPartitioner, defaultPartitioner, clientSoftwareVersion
} from '@platformatic/kafka'

const [bootstrap] = process.argv.slice(2)
// COMMITGATE_COMPAT_CLIENT_SETTINGS: a JSON file merged into every client's options (tls, sasl)
const settingsFile = process.env.COMMITGATE_COMPAT_CLIENT_SETTINGS
const settings = settingsFile ? JSON.parse(readFileSync(settingsFile, 'utf8')) : {}
const base = { clientId: 'commitgate-compat', bootstrapBrokers: [bootstrap], retries: 3, ...settings }
const admin = new Admin(base)
const consumers = new Map()
const transactionalProducers = new Map() // transactional id -> its one Producer
const ASSIGN_ONLY_GROUP = 'commitgate-compat-assign-only' // a Consumer needs a group id
const FETCH_WAIT_MS = 100
const MAX_BYTES = 16 << 20
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))
const hex = b => (b === null || b === undefined ? null : Buffer.from(b).toString('hex'))
const bytes = h => (h === null ? null : Buffer.from(h, 'hex'))
const ACKS = { 0: ProduceAcks.NO_RESPONSE, 1: ProduceAcks.LEADER, all: ProduceAcks.ALL }

function recordOut (partition, offset, timestamp, key, value, headers) {
  return {
    partition, offset: Number(offset), timestamp: Number(timestamp), key: hex(key), value: hex(value),
    headers: [...headers].map(([k, v]) => [Buffer.from(k).toString(), hex(v)])
  }
}

// Header names as distinct Buffer objects: a Map keeps a name given twice as two headers.
function messageIn (topic, r) {
  const m = { topic, key: bytes(r.key) ?? undefined, value: bytes(r.value), headers: new Map(r.headers.map(([k, v]) => [Buffer.from(k), bytes(v)])) }
  if (r.timestamp !== null) m.timestamp = BigInt(r.timestamp)
  if (r.partition !== null) m.partition = r.partition
  return m
}

const isIdempotent = config => !!config.idempotent || !!config.transactional_id

function producerFor (config) {
  return new Producer({
    ...base, idempotent: isIdempotent(config), transactionalId: config.transactional_id || undefined, autocreateTopics: true,
    compression: config.compression || 'none'
  })
}

// One producer per transactional id, kept to the end, as an application keeps it: a new one
// sends InitProducerId with producer id 0 and epoch 0 (not -1/-1), which Kafka answers with
// PRODUCER_FENCED once the id has a producer (KIP-360).
function transactionalProducer (config) {
  if (!transactionalProducers.has(config.transactional_id)) {
    transactionalProducers.set(config.transactional_id, producerFor(config))
  }
  return transactionalProducers.get(config.transactional_id)
}

async function produce ({ topic, records, config }) {
  const transactional = !!config.transactional_id
  const idempotent = isIdempotent(config)
  const producer = transactional ? transactionalProducer(config) : producerFor(config)
  try {
    const messages = records.map(r => messageIn(topic, r))
    const placed = new Map() // message -> the partitioner's choice, before the library's modulo
    const keyed = config.partitioner === 'murmur2' ? compatibilityPartitioner : defaultPartitioner
    let next = 0 // the library's own round robin for null keys, kept here to see where it goes
    const partitioner = (m, key) => { placed.set(m, key ? keyed(m, key) : next++); return placed.get(m) }
    const acks = ACKS[config.acks ?? 'all']
    const options = { messages, acks: idempotent ? ProduceAcks.ALL : acks, partitioner }
    let result
    if (transactional) {
      const transaction = await producer.beginTransaction()
      result = await transaction.send(options)
      await (config.abort ? transaction.abort() : transaction.commit())
    } else {
      result = await producer.send(options)
    }
    const { partitionsCount } = (await producer.metadata({ topics: [topic] })).topics.get(topic)
    const offsets = {} // per partition: the offset of its next record
    for (const { partition, offset } of result.offsets ?? []) offsets[partition] = Number(offset)
    const sent = messages.map(m => {
      const partition = (m.partition ?? placed.get(m)) % partitionsCount
      return { partition, offset: partition in offsets ? offsets[partition]++ : -1 } // acks=0: no answer
    })
    return { sent }
  } finally {
    if (!transactional) await producer.close()
  }
}

// ---- consumers on assigned partitions: fetch by topic id, commit through the admin -----------

async function listOffsets (topic, partitions, timestamp) {
  const [listed] = await admin.listOffsets({ topics: [{ name: topic, partitions: partitions.map(p => ({ partitionIndex: p, timestamp })) }] })
  return Object.fromEntries(listed.partitions.map(p => [p.partitionIndex, Number(p.offset)]))
}

async function committedOffsets (group, topic, partitions) {
  const [found] = await admin.listConsumerGroupOffsets({ groups: [{ groupId: group, topics: [{ name: topic, partitionIndexes: partitions }] }] })
  const out = {}
  for (const t of found.topics) for (const p of t.partitions) if (p.committedOffset >= 0n) out[p.partitionIndex] = Number(p.committedOffset)
  return out
}

async function startOffsets (topic, partitions, group, start) {
  if (typeof start === 'number') return Object.fromEntries(partitions.map(p => [p, start]))
  if (start === 'latest') return listOffsets(topic, partitions, ListOffsetTimestamps.LATEST)
  const earliest = await listOffsets(topic, partitions, ListOffsetTimestamps.EARLIEST)
  if (start !== null && typeof start === 'object') {
    const found = await listOffsets(topic, partitions, BigInt(start.timestamp))
    const latest = await listOffsets(topic, partitions, ListOffsetTimestamps.LATEST)
    return Object.fromEntries(partitions.map(p => [p, found[p] >= 0 ? found[p] : latest[p]]))
  }
  if (start === 'committed') return { ...earliest, ...(await committedOffsets(group, topic, partitions)) }
  return earliest
}

async function openAssigned ({ name, topic, partitions, group, start, read_committed: readCommitted }) {
  const offsets = await startOffsets(topic, partitions, group, start)
  const consumer = new Consumer({ ...base, groupId: group || ASSIGN_ONLY_GROUP })
  consumers.set(name, { topic, group, offsets, consumer, readCommitted, assignment: partitions })
  return { positions: offsets }
}

async function fetchOnce (c) {
  const out = []
  const metadata = await c.consumer.metadata({ topics: [c.topic] })
  const { id: topicId, partitions: described } = metadata.topics.get(c.topic)
  const byLeader = new Map()
  for (const p of c.assignment) {
    const leader = described[p].leader
    byLeader.set(leader, [...(byLeader.get(leader) || []), p])
  }
  for (const [node, partitions] of byLeader) {
    const response = await c.consumer.fetch({
      node, maxWaitTime: FETCH_WAIT_MS, isolationLevel: c.readCommitted ? FetchIsolationLevels.READ_COMMITTED : FetchIsolationLevels.READ_UNCOMMITTED,
      topics: [{ topicId, partitions: partitions.map(p => ({ partition: p, fetchOffset: BigInt(c.offsets[p]), partitionMaxBytes: MAX_BYTES, currentLeaderEpoch: -1, lastFetchedEpoch: -1 })) }]
    })
    for (const topic of response.responses) {
      for (const part of topic.partitions) {
        for (const batch of part.records || []) {
          const control = (batch.attributes & 0x20) !== 0
          for (const r of batch.records) {
            const offset = Number(batch.firstOffset) + r.offsetDelta
            if (offset < c.offsets[part.partitionIndex]) continue // fetch began mid-batch
            c.offsets[part.partitionIndex] = offset + 1
            if (!control) out.push(recordOut(part.partitionIndex, offset, batch.firstTimestamp + r.timestampDelta, r.key, r.value, r.headers))
          }
        }
      }
    }
  }
  return out
}

async function pollAssigned (c, count, maxMs) {
  const out = []
  const deadline = Date.now() + maxMs
  while (out.length < count && Date.now() < deadline) out.push(...await fetchOnce(c))
  return out
}

// ---- group members: a consume() stream feeds a buffer that polls take from -----------------------

async function openMember ({ name, topic, group, group_protocol: groupProtocol = 'classic' }) {
  const consumer = new Consumer({ ...base, groupId: group, autocommit: false, groupProtocol })
  const member = { topic, consumer, buffer: [], returned: {} }
  member.stream = await consumer.consume({
    topics: [topic], mode: MessagesStreamModes.COMMITTED, fallbackMode: MessagesStreamFallbackModes.EARLIEST, autocommit: false, maxWaitTime: FETCH_WAIT_MS
  })
  member.stream.on('data', m => member.buffer.push(recordOut(m.partition, m.offset, m.timestamp, m.key, m.value, m.headers)))
  member.stream.on('error', e => { member.error = e })
  consumers.set(name, member)
  return { positions: {} }
}

function memberAssignment (c) {
  const mine = (c.consumer.assignments || []).find(a => a.topic === c.topic)
  return mine ? [...mine.partitions].sort((a, b) => a - b) : []
}

async function poll ({ name, count, max_ms: maxMs }) {
  const c = consumers.get(name)
  if (!c.stream) return { records: await pollAssigned(c, count, maxMs), assignment: c.assignment }
  const deadline = Date.now() + maxMs
  while (c.buffer.length < count && Date.now() < deadline && !c.error) await sleep(20)
  if (c.error) throw c.error
  const records = c.buffer.splice(0, count)
  for (const r of records) c.returned[r.partition] = r.offset + 1
  return { records, assignment: memberAssignment(c) }
}

// offsets: {partition: offset} to commit, or null for the consumer's position
async function commit ({ name, offsets }) {
  const c = consumers.get(name)
  const chosen = offsets ?? (c.stream ? c.returned : c.offsets)
  const pairs = Object.entries(chosen).map(([p, o]) => ({ partition: Number(p), offset: BigInt(o) }))
  if (c.stream) {
    await c.consumer.commit({ offsets: pairs.map(({ partition, offset }) => ({ topic: c.topic, partition, offset, leaderEpoch: -1 })) })
  } else {
    await admin.alterConsumerGroupOffsets({ groupId: c.group, topics: [{ name: c.topic, partitionOffsets: pairs }] })
  }
  return { committed: Object.fromEntries(pairs.map(({ partition, offset }) => [partition, Number(offset)])) }
}

async function close ({ name }) {
  const c = consumers.get(name)
  consumers.delete(name)
  if (c.stream) await c.stream.close()
  await c.consumer.close()
  return {}
}

// ---- admin ----------------------------------------------------------------------------------------

const TOPIC = ConfigResourceTypes.TOPIC
const ops = {
  hello: async () => ({ client: '@platformatic/kafka', version: clientSoftwareVersion }),
  metadata: async ({ topic }) => {
    const metadata = await admin.metadata({ topics: [topic], forceUpdate: true })
    const { partitionsCount } = metadata.topics.get(topic)
    return { partitions: [...Array(partitionsCount).keys()], brokers: metadata.brokers.size }
  },
  create_topic: async ({ topic, partitions, configs }) => {
    await admin.createTopics({ topics: [topic], partitions, replicas: 1, configs: Object.entries(configs).map(([name, value]) => ({ name, value })) })
    return {}
  },
  delete_topic: async ({ topic }) => { await admin.deleteTopics({ topics: [topic] }); return {} },
  list_topics: async () => ({ topics: await admin.listTopics() }),
  describe_configs: async ({ topic }) => {
    const [described] = await admin.describeConfigs({ resources: [{ resourceType: TOPIC, resourceName: topic }] })
    return { configs: Object.fromEntries(described.configs.map(e => [e.name, e.value])) }
  },
  alter_config: async ({ topic, name, value }) => {
    await admin.incrementalAlterConfigs({ resources: [{ resourceType: TOPIC, resourceName: topic, configs: [{ name, value, configOperation: IncrementalAlterConfigOperationTypes.SET }] }] })
    return {}
  },
  create_partitions: async ({ topic, total }) => { await admin.createPartitions({ topics: [{ name: topic, count: total }] }); return {} },
  delete_records: async ({ topic, partition, offset }) => {
    await admin.deleteRecords({ topics: [{ name: topic, partitions: [{ partition, offset: BigInt(offset) }] }] })
    return {}
  },
  produce,
  consumer_open: async r => (r.partitions === null ? openMember(r) : openAssigned(r)),
  poll,
  commit,
  consumer_close: close
}

async function main () {
  const lines = readline.createInterface({ input: process.stdin })
  for await (const line of lines) {
    if (!line.trim()) continue
    const { op, ...request } = JSON.parse(line)
    let answer
    try {
      answer = { ok: await ops[op](request) }
    } catch (e) {
      const cause = e.errors ? ` (${e.errors.map(x => x.message).join('; ')})` : ''
      answer = { error: `${e.name || 'Error'}: ${e.message}${cause}\n${e.stack || ''}` }
    }
    process.stdout.write(JSON.stringify(answer) + '\n')
  }
  for (const name of [...consumers.keys()]) await close({ name })
  for (const producer of transactionalProducers.values()) await producer.close()
  await admin.close()
}

main().then(() => process.exit(0), e => { console.error(e); process.exit(1) })
