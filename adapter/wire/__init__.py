"""What the adapter writes to Kafka's system topics: the records and their Avro codec."""
