// A KafkaJS consumer in a group: `node consume_group.js BOOTSTRAP GROUP TOPIC COUNT` reads
// COUNT records (autoCommit off) and prints their values, one a line.
// kafkajs is found through NODE_PATH (the test installs it into a directory of its own).
const { Kafka, logLevel } = require("kafkajs");

const [bootstrap, groupId, topic, count] = process.argv.slice(2);
const kafka = new Kafka({ clientId: "shoal-js", brokers: [bootstrap], logLevel: logLevel.NOTHING });
const consumer = kafka.consumer({ groupId, sessionTimeout: 10000, heartbeatInterval: 1000 });
const got = [];

async function main() {
  await consumer.connect();
  await consumer.subscribe({ topics: [topic], fromBeginning: true });
  await new Promise((resolve) => {
    consumer.run({
      autoCommit: false,
      eachMessage: async ({ message }) => {
        got.push(message.value.toString());
        if (got.length >= Number(count)) resolve();
      },
    });
  });
  await consumer.disconnect();
  console.log(got.join("\n"));
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
