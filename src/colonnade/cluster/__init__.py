"""Local Apache Cassandra clusters for development and tests: ``LocalCluster`` downloads
Cassandra 5.0 from Maven Central once, runs one or more nodes on loopback addresses
(127.0.0.1, 127.0.0.2, ...) and starts, stops, inspects and wipes them, with only Java 17
and Maven installed."""

from colonnade.cluster.cassandra import ClusterError, LocalCluster, NodeStatus, cql_ready

__all__ = ["ClusterError", "LocalCluster", "NodeStatus", "cql_ready"]
