"""`shoal migrate`'s parts: the durable offset map, the record copy, topics and configs, group
positions, ACLs and users, progress and the final report. Kafka protocol only, both ends."""
