"""A Spark driver in its own process, for tests that kill it or point it at a cluster.

Usage: ``python spark_driver_job.py '<json>'`` with keys ``action`` (``stream-copy`` or
``batch-count``), ``master``, ``servers``, ``stream`` and per action ``checkpoint``,
``trigger`` (``available-now`` or ``continuous``) or ``topic``. Prints one JSON line
with the result on success.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("JAVA_TOOL_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")


def main() -> None:
    cfg = json.loads(sys.argv[1])
    from pyspark.sql import SparkSession

    from adapters.spark import FerryDataSource

    spark = (SparkSession.builder.master(cfg["master"]).appName("ferry-driver-job")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").config("spark.sql.session.timeZone", "UTC")
             .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.executor.memory", "512m").config("spark.cores.max", "1")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(FerryDataSource)
    base = {"servers": cfg["servers"], "stream": cfg["stream"]}
    try:
        if cfg["action"] == "stream-copy":
            reader = (spark.readStream.format("ferry").options(**base, topic="in", startingOffsets="earliest",
                                                               maxOffsetsPerTrigger="200").load())
            writer = (reader.select("payload", "headers").writeStream.format("ferry").options(**base, topic="out")
                      .option("checkpointLocation", cfg["checkpoint"]))
            if cfg["trigger"] == "available-now":
                q = writer.trigger(availableNow=True).start()
                q.awaitTermination()
            else:
                q = writer.trigger(processingTime="100 milliseconds").start()
                print(json.dumps({"started": True}), flush=True)
                q.awaitTermination()  # until killed
            print(json.dumps({"done": True}), flush=True)
        elif cfg["action"] == "batch-count":
            df = spark.read.format("ferry").options(**base, topic=cfg["topic"]).load()
            rows = df.selectExpr("partition", "offset", "cast(payload as string) p").collect()
            print(json.dumps({"rows": sorted([r.partition, r.offset, r.p] for r in rows),
                              "master": spark.sparkContext.master}), flush=True)
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
