#!/usr/bin/env bash
# Installs the Debian packages the test suite needs when they are missing:
# PostgreSQL (contract and integration tests), ZooKeeper (leader election,
# Aurora discovery), the Apache Thrift compiler (an independent Aurora
# client for the bridge tests), Chromium (the web UI's browser tests, run
# headless), and Java with Maven (Cassandra's server, see Makefile). Idempotent and quiet when all are present.
set -euo pipefail
need=()
ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || need+=(postgresql)
[ -f /usr/share/java/zookeeper.jar ] || need+=(zookeeper)
command -v thrift >/dev/null 2>&1 || need+=(thrift-compiler)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
# Java 17 and Maven: Apache Cassandra's server for the real-server storage tests.
command -v java >/dev/null 2>&1 || need+=(openjdk-17-jre-headless)
command -v mvn >/dev/null 2>&1 || need+=(maven)
[ ${#need[@]} -eq 0 ] && exit 0
echo "installing Debian packages: ${need[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
if ! $sudo apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null 2>&1; then
  $sudo apt-get update -q >/dev/null
  $sudo apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
fi
# Debian's zookeeper package enables a system service on 2181; the tests run
# their own server on a free port, so leave any service alone.
