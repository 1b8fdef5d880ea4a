#!/bin/sh
# One KRaft node with two client listeners, like Redpanda's in docker-compose.yml:
# containers reach it as KAFKA_INTERNAL_ADDRESS, the host as KAFKA_EXTERNAL_ADDRESS.
# The broker settings are the bare-machine stack's for one node (infra/kafka_broker.py).
set -eu
data=${KAFKA_DATA_DIR:-/var/lib/kafka/data}
internal=${KAFKA_INTERNAL_ADDRESS:-broker:9092}
external=${KAFKA_EXTERNAL_ADDRESS:-localhost:19092}
config=/tmp/server.properties
cat > "$config" <<PROPERTIES
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:9093
listeners=INTERNAL://0.0.0.0:9092,EXTERNAL://0.0.0.0:19092,CONTROLLER://127.0.0.1:9093
advertised.listeners=INTERNAL://${internal},EXTERNAL://${external}
listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=INTERNAL
controller.listener.names=CONTROLLER
log.dirs=${data}
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=8
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
unclean.leader.election.enable=false
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
log.cleaner.backoff.ms=5000
message.max.bytes=8388608
PROPERTIES
jvm="-Xmx${KAFKA_HEAP:-512m} -Xms${KAFKA_HEAP:-512m} -XX:+UseG1GC -Djava.awt.headless=true"
jvm="$jvm -Dlog4j.configuration=file:/opt/kafka/log4j.properties -cp /opt/kafka/lib/*"
set -f  # $jvm is split into words, never expanded as a glob (the class path is one)
if [ ! -f "$data/meta.properties" ]; then
  # shellcheck disable=SC2086
  java $jvm kafka.tools.StorageTool format --ignore-formatted \
    -t "$(java $jvm kafka.tools.StorageTool random-uuid)" -c "$config"
fi
# shellcheck disable=SC2086
exec java $jvm kafka.Kafka "$config"
