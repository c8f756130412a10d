"""``--engine spark``: event aggregation on a Spark cluster (or ``local[*]``), DataFrame API only.

Which stage runs where:

1. **read** (Spark executors): Parquet with its own types; CSV with a header and every column as
   text, so that the kernel parses and checks values cell by cell exactly as the local engine does.
   Only the columns the job reads are selected.
2. **tie-break key** (Spark): every row gets its 0-based row number in the input file
   (:data:`tsdp.engine.kernel.ORDER`), the key the local engine assigns too. Parquet has it as
   ``_metadata.row_index``. For CSV a first, cheap pass counts the rows of every file split
   (``_metadata.file_block_start``): within a scan partition ``monotonically_increasing_id()``
   numbers rows in file order, so ``offset of the split + (id - first id of the split)`` is the row
   number. Both depend only on the file, never on how Spark partitions or shuffles it, so "the
   earliest rows" are the same rows whatever the cluster. The same pass decides, over the whole
   file, what polars would make of a CSV time column (integers, dates or datetimes), so every
   partition parses time the way the local engine parses the whole file.
3. **bound and aggregate** (Spark executors): ``repartition`` by the user column puts every row of
   a user in one partition; ``mapInArrow`` hands each partition to the same polars kernel
   (:func:`tsdp.engine.events.partial_cell_sums`), which returns the partition's cell sums, row
   counts and time type as typed records. Data errors (a bad timestamp, a missing user id) are
   records too, naming the input row, so they never become Java stack traces or task retries.
4. **reduce** (Spark): the records are summed per (series, bucket) and per counter; the small
   result comes to the driver with ``toArrow()`` and :func:`tsdp.engine.events.assemble` builds the
   panel there.

No noise is ever drawn here: this module only aggregates; the release adds noise on the driver.
The Python workers import tsdp, so tsdp (with its dependencies) must be installed on them.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import sys
import tempfile
import warnings
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import polars as pl

from tsdp import errors
from tsdp.engine.kernel import ORDER, SERIES, STEP, VALUE
from tsdp.errors import DataError, TsdpError, UsageError
from tsdp.engine.events import EventAggregation, EventJob, PartialSums, assemble, partial_cell_sums
from tsdp.io.files import table_format
from tsdp.io.layouts import require_columns

EXTRA_HINT = "--engine spark needs the optional extra: pip install 'tsdp[spark]'"
JAVA_HINT = ("--engine spark needs Java 17 or newer: install a Java 17 runtime (e.g. apt-get install "
             "openjdk-17-jre-headless) and put it on PATH or set JAVA_HOME")

# Records of the bound-and-aggregate stage (one schema for every kind of result of a partition).
RECORD_SCHEMA = "record string, key string, step long, value double, count long, text string"
CELL, DIAG, TIME_TYPE, ERROR = "cell", "diag", "time_type", "error"
# Per file split and text column (its index in the columns examined, -1 if none), from the first
# pass over a CSV input.
SPLIT_SCHEMA = ("path string, block long, rows long, first_id long, column long, nonnull long, n_int long, "
                "n_float long, n_bool long, n_date long")
PATH, BLOCK, ID = "__path", "__block", "__id"

# polars' CSV type inference (the same regular expressions), for a time column read as text.
_BOOL_RE = r"^(?i:true|false)$"
_INT_RE = r"^-?(\d+)$"
_FLOAT_RE = r"^[-+]?((\d*\.\d+)([eE][-+]?\d+)?|inf|NaN|(\d+)[eE][-+]?\d+|\d+\.)$"

_LOG = {"path": None, "keep": False}


class SparkJobError(TsdpError):
    """The Spark job failed for a reason other than bad input data (exit 1)."""


@dataclass(frozen=True)
class TimeHint:
    """What the whole input says about its time column, applied in every partition.

    ``csv_type``: the type polars infers for the CSV column over the whole file (``Int64``,
    ``Float64``, ``Boolean`` or ``String``). ``as_datetime``: the text holds values that are not
    plain dates, so the whole column is parsed as datetimes (a partition holding only dates must
    not become a Date column). ``target``: the Parquet file's own type of the column when Spark
    reads it as another one (time zone, unit, unsigned integers).
    """

    csv_type: str | None = None
    as_datetime: bool = False
    target: pl.DataType | None = None


# ------------------------------------------------------------------------------------------
# the session
# ------------------------------------------------------------------------------------------


def _quiet(action):
    """Run ``action()`` without pyspark's warning about pandas 3 (mapInArrow does not use pandas)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas",
                                category=FutureWarning)
        return action()


def _require_pyspark():
    try:
        warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas",
                                category=FutureWarning)
        import pandas  # noqa: F401  (mapInArrow needs it)
        import pyarrow  # noqa: F401
        import pyspark
    except ImportError:
        raise UsageError(EXTRA_HINT) from None
    return pyspark


def _java() -> str:
    """The java Spark's launcher will run (JAVA_HOME first, then PATH); UsageError if none."""
    home = os.environ.get("JAVA_HOME")
    if home:
        java = Path(home) / "bin" / "java"
        if os.access(java, os.X_OK):
            return str(java)
        raise UsageError(f"{JAVA_HINT} (JAVA_HOME={home!r} holds no bin/java)")
    java = shutil.which("java")
    if java is None:
        raise UsageError(JAVA_HINT)
    return java


def _is_local(master: str) -> bool:
    return master.startswith("local")


def _log_path() -> str:
    """The file that receives the JVM's (and the Python workers') console output."""
    if _LOG["path"] is None:
        fd, name = tempfile.mkstemp(prefix="tsdp-spark-", suffix=".log")
        os.close(fd)
        _LOG["path"] = name
        atexit.register(_remove_log)
    return _LOG["path"]


def _remove_log() -> None:
    if _LOG["path"] and not _LOG["keep"]:
        Path(_LOG["path"]).unlink(missing_ok=True)


def _log4j_file() -> str:
    """A log4j2 configuration: errors only (also for the shell banner's logger)."""
    path = Path(tempfile.gettempdir()) / f"tsdp-spark-log4j2-{os.getpid()}.properties"
    if not path.exists():
        path.write_text(
            "rootLogger.level = error\n"
            "rootLogger.appenderRef.stderr.ref = console\n"
            "appender.console.type = Console\n"
            "appender.console.name = console\n"
            "appender.console.target = SYSTEM_ERR\n"
            "appender.console.layout.type = PatternLayout\n"
            "appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex\n"
            "logger.repl.name = org.apache.spark.repl.Main\n"
            "logger.repl.level = error\n"
        )
        atexit.register(lambda: path.unlink(missing_ok=True))
    return str(path)


def spark_session(master: str = "local[*]", conf: dict | None = None):
    """A SparkSession for tsdp: Arrow on, UTC session time, no console progress bar, errors-only
    logging, the JVM's console output sent to a log file (so stdout and stderr stay tsdp's), and
    Python workers running this interpreter (``PYSPARK_PYTHON``).

    ``conf`` (Spark configuration, e.g. ``spark.executor.memory``) overrides these defaults. When
    a SparkContext is already running in this process it is reused (``conf`` then applies only to
    the settings Spark can change at run time).
    """
    _require_pyspark()
    from pyspark import SparkConf, SparkContext
    from pyspark.errors import PySparkRuntimeError
    from pyspark.sql import SparkSession

    if _is_local(master):
        os.environ["PYSPARK_PYTHON"] = sys.executable
    else:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable

    settings = {
        "spark.app.name": "tsdp",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
    }
    if _is_local(master):
        settings["spark.ui.enabled"] = "false"
    settings.update({str(k): str(v) for k, v in (conf or {}).items()})
    log_option = f"-Dlog4j2.configurationFile=file:{_log4j_file()}"
    settings["spark.driver.extraJavaOptions"] = " ".join(
        filter(None, [settings.get("spark.driver.extraJavaOptions"), log_option]))

    spark_conf = SparkConf().setMaster(master)
    for key, value in settings.items():
        spark_conf.set(key, value)
    if SparkContext._active_spark_context is None and SparkContext._gateway is None:
        _java()
        from pyspark.java_gateway import launch_gateway

        log = _log_path()
        try:
            with open(log, "ab") as sink:
                gateway = launch_gateway(spark_conf, popen_kwargs={"stdout": sink, "stderr": sink})
        except PySparkRuntimeError:
            _LOG["keep"] = True
            raise UsageError(f"{JAVA_HINT}; Spark's JVM did not start ({_last_line(log)}; log: {log})") from None
        SparkContext(conf=spark_conf, gateway=gateway)
    elif SparkContext._active_spark_context is None:
        SparkContext(conf=spark_conf)
    return SparkSession.builder.config(conf=spark_conf).getOrCreate()


def _last_line(path: str) -> str:
    try:
        lines = [line.strip() for line in Path(path).read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "no output"
    return lines[-1] if lines else "no output"


# ------------------------------------------------------------------------------------------
# the aggregation
# ------------------------------------------------------------------------------------------


def aggregate_events_spark(path: str, job: EventJob, master: str = "local[*]", conf: dict | None = None,
                           spark=None) -> EventAggregation:
    """Aggregate the events of ``path`` (CSV or Parquet) on Spark: same caps, same kept rows and
    same panel as the local engine. ``spark``: a running SparkSession to use (left running);
    otherwise one is started for ``master`` with ``conf`` (see :func:`spark_session`) and stopped.
    """
    fmt = check_input(path)
    if spark is not None:
        return _aggregate(spark, path, fmt, job)
    session = spark_session(master, conf)
    try:
        return _aggregate(session, path, fmt, job)
    finally:
        session.stop()


def check_input(path: str) -> str:
    """The input's format (``csv`` or ``parquet``); UsageError for a missing local file, a
    directory, or stdin."""
    fmt = table_format(path)
    if fmt not in ("csv", "parquet"):
        raise UsageError(f"INPUT: --engine spark reads .csv and .parquet files, not {fmt} ({path!r}); "
                         "use --engine local or convert the file")
    if "://" not in path and not path.startswith("-"):
        p = Path(path)
        if not p.exists():
            raise UsageError(f"INPUT: file {path!r} does not exist")
        if p.is_dir():
            raise UsageError(f"INPUT: {path!r} is a directory, not a file")
    elif path == "-":
        raise UsageError("INPUT: --engine spark cannot read stdin; give a file")
    return fmt


def _aggregate(spark, path: str, fmt: str, job: EventJob, worker=None) -> EventAggregation:
    from pyspark.sql import functions as F

    with _spark_errors(path, fmt):
        frame, rows, hint = _event_rows(spark, path, fmt, job)
        task = partial(worker or _partition_sums, job, hint)
        records = (_quiet(lambda: rows.repartition(_col(job.user_col)).mapInArrow(task, RECORD_SCHEMA))
                   .groupBy("record", "key", "step", "text")
                   .agg(F.sum("value").alias("value"), F.sum("count").alias("count")))
        result = pl.from_arrow(records.toArrow())
        if not result.filter(pl.col("record").is_in([TIME_TYPE, ERROR])).height:
            # No rows at all: run the kernel on the empty input, as the local engine does.
            empty = pl.from_arrow(frame.select(*[_col(c) for c in job.columns]).limit(0).toArrow())
            return assemble(job, [partial_cell_sums(_align_time(empty, job.time_col, hint), job)])
    return _assemble(job, result)


def _event_rows(spark, path: str, fmt: str, job: EventJob):
    """(the input as Spark reads it, its job columns with the tie-break key ORDER, the TimeHint)."""
    frame = read_input(spark, path, fmt)
    require_columns(pl.DataFrame({c: [] for c in dict.fromkeys(frame.columns)}),
                    {"--user-col": job.user_col, "--time-col": job.time_col,
                     "--series-col": job.series_col, "--value-col": job.value_col})
    if fmt == "parquet" and frame.schema[job.time_col].dataType.typeName() != "string":
        rows, _ = ordered_rows(spark, frame, fmt, job.columns, [])
        return frame, rows, TimeHint(target=_parquet_time_type(path, job.time_col))
    rows, splits = ordered_rows(spark, frame, fmt, job.columns, [job.time_col])
    return frame, rows, text_hint(splits, 0, csv=fmt == "csv")


def read_input(spark, path: str, fmt: str):
    """The input as Spark reads it: CSV with a header and every column as text, Parquet typed."""
    source = os.path.abspath(path) if "://" not in path else path
    if fmt == "csv":
        return spark.read.option("header", True).option("mode", "PERMISSIVE").csv(source)
    return spark.read.parquet(source)


def ordered_rows(spark, frame, fmt: str, columns: list[str], texts: list[str]):
    """(``columns`` of ``frame`` with the tie-break key ORDER, the split statistics of the text
    columns ``texts`` (see :func:`text_hint`; None when there is no first pass))."""
    from pyspark.sql import functions as F

    selected = [_col(c) for c in columns]
    if fmt == "parquet" and not texts:
        return frame.select(*selected, F.col("_metadata.row_index").alias(ORDER)), None

    # First pass: rows per file split (CSV) and what the texts look like.
    scan = frame.select(*selected, F.col("_metadata.file_path").alias(PATH),
                        F.col("_metadata.file_block_start").alias(BLOCK),
                        F.monotonically_increasing_id().alias(ID))
    stats = _quiet(lambda: scan.select(*[_col(c) for c in dict.fromkeys(texts)], PATH, BLOCK, ID)
                   .mapInArrow(partial(_split_stats, list(texts)), SPLIT_SCHEMA))
    splits = pl.from_arrow(stats.toArrow())
    if fmt == "parquet":
        return frame.select(*selected, F.col("_metadata.row_index").alias(ORDER)), splits
    bases = (splits.unique(["path", "block"]).sort(["path", "block"])
             .select(pl.col("path"), pl.col("block"),
                     (pl.col("rows").cum_sum() - pl.col("rows") - pl.col("first_id")).alias("base")))
    offsets = spark.createDataFrame(list(bases.iter_rows()), f"{PATH} string, {BLOCK} long, base long")
    rows = (scan.join(F.broadcast(offsets), on=[PATH, BLOCK])
            .select(*selected, (F.col(ID) + F.col("base")).alias(ORDER)))
    return rows, splits


def _col(name: str):
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


def _assemble(job: EventJob, result: pl.DataFrame) -> EventAggregation:
    """The panel from the reduced records (or the first data error, by input row)."""
    failures = result.filter(pl.col("record") == ERROR).sort(["step", "text"], nulls_last=False)
    if failures.height:
        raise_failure(failures["key"][0], failures["text"][0])
    cells = result.filter(pl.col("record") == CELL)
    sums = pl.DataFrame({SERIES: cells["key"], STEP: cells["step"], VALUE: cells["value"]},
                        schema={SERIES: pl.String, STEP: pl.Int64, VALUE: pl.Float64})
    diag = {k: int(v) for k, v in result.filter(pl.col("record") == DIAG).select("key", "count").iter_rows()}
    types = sorted(result.filter(pl.col("record") == TIME_TYPE)["key"].to_list())
    parts = [PartialSums(sums, diag, _dtype_from_code(types[0]))]
    # Partitions whose time column parsed to another type: assemble refuses them, in its words.
    parts += [PartialSums(sums.clear(), {}, _dtype_from_code(code)) for code in types[1:]]
    return assemble(job, parts)


# ------------------------------------------------------------------------------------------
# what runs in the Python workers
# ------------------------------------------------------------------------------------------


def _frame(batches) -> pl.DataFrame | None:
    import pyarrow as pa

    batches = list(batches)
    if not batches:
        return None
    table = pa.Table.from_batches(batches)
    return pl.from_arrow(table) if table.num_rows else None


def _split_stats(columns: list[str], batches):
    """Per file split: its rows, its first row id, and per text column what its texts look like."""
    import pyarrow as pa

    df = _frame(batches)
    if df is None:
        return
    split = [pl.len().cast(pl.Int64).alias("rows"), pl.col(ID).min().alias("first_id")]
    parts = []
    for index, name in enumerate(columns or [None]):
        if name is None:
            text = pl.lit(None, dtype=pl.String)
            index = -1
        else:
            text = pl.col(name)
        stripped = text.str.strip_chars()
        parts.append(df.group_by(PATH, BLOCK).agg(
            *split,
            pl.lit(index, dtype=pl.Int64).alias("column"),
            text.is_not_null().sum().cast(pl.Int64).alias("nonnull"),
            text.str.contains(_INT_RE).sum().cast(pl.Int64).alias("n_int"),
            (text.str.contains(_FLOAT_RE) | text.str.contains(_INT_RE)).sum().cast(pl.Int64).alias("n_float"),
            text.str.contains(_BOOL_RE).sum().cast(pl.Int64).alias("n_bool"),
            stripped.str.to_date(format="%Y-%m-%d", strict=False).is_not_null().sum().cast(pl.Int64)
            .alias("n_date"),
        ))
    stats = pl.concat(parts).rename({PATH: "path", BLOCK: "block"})
    schema = pa.schema([("path", pa.string())] + [(c, pa.int64()) for c in stats.columns[1:]])
    yield from stats.to_arrow().cast(schema).to_batches()


def _partition_sums(job: EventJob, hint: TimeHint, batches):
    """The kernel on one partition (every row of its users): records of cell sums, counts, the
    time type, or the data error (naming the input row)."""
    import pyarrow as pa

    df = _frame(batches)
    if df is None:
        return
    # Input order within the partition: the first bad row found is the partition's earliest.
    df = _align_time(df.sort(ORDER), job.time_col, hint)
    try:
        part = partial_cell_sums(df, job, order_col=ORDER)
    except TsdpError as exc:
        name, row, message = failure(exc)
        records = pl.DataFrame({"record": [ERROR], "key": [name], "step": [row], "text": [message]})
    else:
        sums = part.sums
        records = pl.concat([
            sums.select(pl.lit(CELL).alias("record"), pl.col(SERIES).alias("key"),
                        pl.col(STEP).cast(pl.Int64).alias("step"), pl.col(VALUE).cast(pl.Float64).alias("value")),
            pl.DataFrame({"record": DIAG, "key": list(part.diagnostics),
                          "count": list(part.diagnostics.values())}, schema_overrides={"count": pl.Int64}),
            pl.DataFrame({"record": [TIME_TYPE], "key": [_dtype_code(part.time_dtype)], "count": [1]}),
        ], how="diagonal_relaxed")
    schema = pa.schema([("record", pa.string()), ("key", pa.string()), ("step", pa.int64()),
                        ("value", pa.float64()), ("count", pa.int64()), ("text", pa.string())])
    for name in schema.names:
        if name not in records.columns:
            records = records.with_columns(pl.lit(None).alias(name))
    yield from records.select(schema.names).to_arrow().cast(schema).to_batches()


def _align_time(df: pl.DataFrame, column: str, hint: TimeHint) -> pl.DataFrame:
    """The time column (or another column: mean-estimate's group keys) as the local engine would
    have read it from the whole file (see TimeHint); never raises: the kernel's own checks report
    bad values."""
    s = df[column]
    if s.dtype == pl.String and hint.csv_type == "Int64":
        s = s.cast(pl.Int64, strict=False)
    elif s.dtype == pl.String and hint.csv_type == "Float64":
        s = s.cast(pl.Float64, strict=False)
    elif s.dtype == pl.String and hint.csv_type == "Boolean":
        s = s.str.to_lowercase() == "true"
    elif s.dtype == pl.String and hint.as_datetime:
        stripped = s.str.strip_chars()
        as_date = stripped.str.to_date(format="%Y-%m-%d", strict=False)
        if as_date.null_count() == stripped.null_count():  # the kernel would make it a Date column
            s = as_date.cast(pl.Datetime("us"))
    elif hint.target is not None and s.dtype != hint.target:
        try:
            if isinstance(s.dtype, pl.Datetime) and isinstance(hint.target, pl.Datetime):
                if s.dtype.time_zone and hint.target.time_zone:
                    s = s.dt.convert_time_zone(hint.target.time_zone)
                elif s.dtype.time_zone:
                    s = s.dt.replace_time_zone(None)
            s = s.cast(hint.target)
        except pl.exceptions.PolarsError:
            return df
    else:
        return df
    return df.with_columns(s.alias(column))


# ------------------------------------------------------------------------------------------
# driver-side helpers
# ------------------------------------------------------------------------------------------


def failure(exc: TsdpError) -> tuple[str, int, str]:
    """(class name, the input row the message names or 0, message) of an error in a worker."""
    message = str(exc)
    row = re.search(r"at row (\d+)", message)
    return type(exc).__name__, int(row.group(1)) if row else 0, message


def raise_failure(name: str, message: str):
    """Raise a worker's error on the driver, as the tsdp.errors class it had (else TsdpError)."""
    cls = getattr(errors, name, None)
    if not (isinstance(cls, type) and issubclass(cls, TsdpError)):
        cls = TsdpError
    raise cls(message)


def text_hint(splits: pl.DataFrame, index: int, csv: bool) -> TimeHint:
    """What the split statistics say about text column ``index``: the type polars infers for it
    in a CSV file, and whether a time column holds more than plain dates (see TimeHint)."""
    splits = splits.filter(pl.col("column") == index)
    total = {c: int(splits[c].sum()) for c in ("nonnull", "n_int", "n_float", "n_bool", "n_date")}
    n = total["nonnull"]
    csv_type = None
    if csv:
        csv_type = "String"
        if n and total["n_int"] == n:
            csv_type = "Int64"
        elif n and total["n_float"] == n:
            csv_type = "Float64"
        elif n and total["n_bool"] == n:
            csv_type = "Boolean"
    return TimeHint(csv_type=csv_type, as_datetime=csv_type in (None, "String") and total["n_date"] < n)


def _parquet_time_type(path: str, column: str) -> pl.DataType | None:
    """The Parquet file's own type of ``column`` as polars reads it (local files only)."""
    if "://" in path:
        return None
    try:
        return pl.read_parquet_schema(path).get(column)
    except (OSError, pl.exceptions.PolarsError):
        return None


def _dtype_code(dtype: pl.DataType) -> str:
    if isinstance(dtype, pl.Datetime):
        return f"Datetime|{dtype.time_unit}|{dtype.time_zone or ''}"
    return str(dtype)


def _dtype_from_code(code: str) -> pl.DataType:
    if code.startswith("Datetime|"):
        _, unit, zone = code.split("|", 2)
        return pl.Datetime(unit, zone or None)
    return {"Int64": pl.Int64, "Date": pl.Date}[code]


class _spark_errors:
    """Spark's failures as tsdp errors of one line (a worker's own TsdpError passes through)."""

    def __init__(self, path: str, fmt: str) -> None:
        self.path, self.fmt = path, fmt

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc is None or isinstance(exc, TsdpError):
            return False
        from pyspark.errors import AnalysisException, PySparkException, PythonException

        try:
            from py4j.protocol import Py4JError
        except ImportError:  # pragma: no cover
            Py4JError = ()
        if not isinstance(exc, (PySparkException, Py4JError)):
            return False
        text = str(exc)
        condition = _condition(exc)
        if isinstance(exc, AnalysisException) or condition.startswith(("PATH_NOT_FOUND", "UNABLE_TO_INFER")):
            raise DataError(f"INPUT: cannot read {self.path!r} as {self.fmt}: {_first_line(text)}") from None
        if "FAILED_READ_FILE" in text or "CANNOT_READ_FILE_FOOTER" in text:
            raise DataError(f"INPUT: cannot parse {self.path!r} as {self.fmt}: {_cause(text)}") from None
        _LOG["keep"] = bool(_LOG["path"])
        where = f" (Spark's log: {_LOG['path']})" if _LOG["path"] else ""
        if isinstance(exc, PythonException):
            raise SparkJobError(f"a Spark task failed: {_python_error(text)}{where}") from None
        raise SparkJobError(f"the Spark job failed: {_cause(text)}{where}") from None


def _condition(exc) -> str:
    for name in ("getCondition", "getErrorClass"):
        try:
            value = getattr(exc, name)()
        except Exception:  # noqa: BLE001
            continue
        if value:
            return str(value)
    return ""


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[0] if lines else "unknown error"


def _cause(text: str) -> str:
    """The innermost 'Caused by:' message of a Java error, else its first line."""
    causes = re.findall(r"Caused by: (?:[\w.$]+: )?(.+)", text)
    return causes[-1].strip() if causes else _first_line(text)


def _python_error(text: str) -> str:
    """The exception line of a Python worker's traceback."""
    lines = [line.strip() for line in text.splitlines()]
    for line in reversed(lines):
        if re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Warning)\b", line):
            return line
    return _first_line(text)
