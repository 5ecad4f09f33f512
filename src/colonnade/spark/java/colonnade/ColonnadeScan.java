package colonnade;

import java.io.IOException;
import java.io.Serializable;
import java.io.UncheckedIOException;
import java.math.BigDecimal;
import java.net.Socket;
import java.time.LocalDate;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.dictionary.Dictionary;
import org.apache.arrow.vector.types.pojo.DictionaryEncoding;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowStreamReader;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.expressions.Expression;
import org.apache.spark.sql.connector.expressions.NamedReference;
import org.apache.spark.sql.connector.expressions.aggregate.AggregateFunc;
import org.apache.spark.sql.connector.expressions.aggregate.Aggregation;
import org.apache.spark.sql.connector.expressions.aggregate.Count;
import org.apache.spark.sql.connector.expressions.aggregate.CountStar;
import org.apache.spark.sql.connector.expressions.aggregate.Max;
import org.apache.spark.sql.connector.expressions.aggregate.Min;
import org.apache.spark.sql.connector.expressions.aggregate.Sum;
import org.apache.spark.sql.connector.read.SupportsPushDownAggregates;
import org.apache.spark.sql.connector.read.SupportsPushDownFilters;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.sources.EqualNullSafe;
import org.apache.spark.sql.sources.EqualTo;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.sources.GreaterThan;
import org.apache.spark.sql.sources.GreaterThanOrEqual;
import org.apache.spark.sql.sources.In;
import org.apache.spark.sql.sources.IsNotNull;
import org.apache.spark.sql.sources.IsNull;
import org.apache.spark.sql.sources.LessThan;
import org.apache.spark.sql.sources.LessThanOrEqual;
import org.apache.spark.sql.sources.Not;
import org.apache.spark.sql.sources.StringContains;
import org.apache.spark.sql.sources.StringEndsWith;
import org.apache.spark.sql.sources.StringStartsWith;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.Metadata;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.apache.spark.sql.vectorized.ArrowColumnVector;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * A read of a Colonnade dataset: the version is pinned when filters are pushed (or when the scan
 * is built), the helper plans the pruned scan into input partitions (groups of segments, with
 * the nodes holding them as preferred locations), and each task streams its group's rows as
 * Arrow batches of just the columns the query needs. An aggregation Spark pushes (grouped by
 * columns; {@code count}, {@code sum}, {@code min}, {@code max} of columns, {@code avg} as the
 * sum and count Spark splits it into) is decided at planning from statistics when they can,
 * else computed by the helper for each task's segments: the task hands Spark one row per group
 * of its segments, and Spark merges the tasks' rows.
 */
final class ColonnadeScan implements Scan, Batch {
    private final Map<String, Object> read; // options, version, columns, filters
    private final StructType schema;

    private ColonnadeScan(Map<String, Object> read, StructType schema) {
        this.read = read;
        this.schema = schema;
    }

    static final class Builder implements ScanBuilder, SupportsPushDownFilters, SupportsPushDownRequiredColumns,
            SupportsPushDownAggregates {
        private final CaseInsensitiveStringMap options;
        private StructType schema;
        private Object version;
        private final List<Object> taken = new ArrayList<>();
        private Filter[] pushed = new Filter[0];
        private Aggregation asked;
        private AggregateScan answered;
        /** The aggregation each task computes for its segments (null: Spark aggregates rows). */
        private Map<String, Object> partial;
        private StructType partialSchema;

        Builder(StructType schema, CaseInsensitiveStringMap options, Object version) {
            this.schema = schema;
            this.options = options;
            this.version = version;
        }

        @Override
        public Filter[] pushFilters(Filter[] filters) {
            List<Object> plain = new ArrayList<>();
            for (Filter f : filters) {
                plain.add(plain(f));
            }
            Map<String, Object> request = Helper.request("filters", options);
            request.put("version", version);
            request.put("filters", plain);
            Map<String, Object> reply = Helper.get().call(request);
            version = reply.get("version");
            List<Object> accepted = Helper.list(reply.get("taken"));
            List<Filter> kept = new ArrayList<>();
            List<Filter> left = new ArrayList<>();
            for (int i = 0; i < filters.length; i++) {
                if (Boolean.TRUE.equals(accepted.get(i))) {
                    kept.add(filters[i]);
                    taken.add(plain.get(i));
                } else {
                    left.add(filters[i]);
                }
            }
            pushed = kept.toArray(new Filter[0]);
            return left.toArray(new Filter[0]);
        }

        @Override
        public Filter[] pushedFilters() {
            return pushed;
        }

        @Override
        public void pruneColumns(StructType required) {
            schema = required;
        }

        /** Decided at planning from statistics, or not pushed: Spark aggregates what it reads. */
        @Override
        public boolean supportCompletePushDown(Aggregation aggregation) {
            return pushesAggregates() && answer(aggregation) != null;
        }

        @Override
        public boolean pushAggregation(Aggregation aggregation) {
            partial = null;
            partialSchema = null;
            return pushesAggregates() && (answer(aggregation) != null || perTask(aggregation));
        }

        /** Option {@code pushAggregates} (default true): false leaves every aggregation to Spark. */
        private boolean pushesAggregates() {
            return options.getBoolean("pushAggregates", true);
        }

        /**
         * Whether each task can aggregate its own segments (Spark then merges the tasks' rows):
         * grouping by columns, every aggregate one {@link #aggregate} takes. Output: the group
         * columns, then the aggregates, of the types Spark's partial aggregates have.
         */
        private boolean perTask(Aggregation aggregation) {
            List<String> groupBy = new ArrayList<>();
            List<StructField> fields = new ArrayList<>();
            for (Expression e : aggregation.groupByExpressions()) {
                String c = column(e);
                if (c == null) {
                    return false;
                }
                groupBy.add(c);
                fields.add(new StructField(c, schema.apply(c).dataType(), true, Metadata.empty()));
            }
            List<Object> aggregates = new ArrayList<>();
            for (AggregateFunc f : aggregation.aggregateExpressions()) {
                Map<String, Object> a = new LinkedHashMap<>();
                DataType type = aggregate(f, a);
                if (type == null) {
                    return false;
                }
                aggregates.add(a);
                fields.add(new StructField("agg_" + aggregates.size(), type, true, Metadata.empty()));
            }
            Map<String, Object> p = new LinkedHashMap<>();
            p.put("group_by", groupBy);
            p.put("aggregates", aggregates);
            partial = p;
            partialSchema = new StructType(fields.toArray(new StructField[0]));
            return true;
        }

        /**
         * Puts {@code f} into {@code out} as the helper takes it ({@code fn}: countstar, count,
         * sum, min or max; {@code col}) and returns the type of its value; null for any other
         * aggregate (distinct, of an expression, a sum of anything but integers or floats).
         */
        private DataType aggregate(AggregateFunc f, Map<String, Object> out) {
            if (f instanceof CountStar) {
                out.put("fn", "countstar");
                return DataTypes.LongType;
            }
            Expression argument;
            if (f instanceof Count x && !x.isDistinct()) {
                out.put("fn", "count");
                argument = x.column();
            } else if (f instanceof Sum x && !x.isDistinct()) {
                out.put("fn", "sum");
                argument = x.column();
            } else if (f instanceof Min x) {
                out.put("fn", "min");
                argument = x.column();
            } else if (f instanceof Max x) {
                out.put("fn", "max");
                argument = x.column();
            } else {
                return null;
            }
            String c = column(argument);
            if (c == null) {
                return null;
            }
            out.put("col", c);
            DataType in = schema.apply(c).dataType();
            if (f instanceof Count) {
                return DataTypes.LongType;
            }
            if (!(f instanceof Sum)) {
                return in;
            }
            if (in == DataTypes.LongType || in == DataTypes.IntegerType || in == DataTypes.ShortType
                    || in == DataTypes.ByteType) {
                return DataTypes.LongType;
            }
            return in == DataTypes.DoubleType || in == DataTypes.FloatType ? DataTypes.DoubleType : null;
        }

        private AggregateScan answer(Aggregation aggregation) {
            if (aggregation == asked) {
                return answered;
            }
            asked = aggregation;
            answered = null;
            if (aggregation.groupByExpressions().length > 0) {
                return null;
            }
            List<Object> aggregates = new ArrayList<>();
            List<StructField> fields = new ArrayList<>();
            for (AggregateFunc f : aggregation.aggregateExpressions()) {
                Map<String, Object> a = new LinkedHashMap<>();
                DataType type = aggregate(f, a);
                if (type == null || "sum".equals(a.get("fn")) || !AggregateScan.supported(type)) {
                    return null;
                }
                aggregates.add(a);
                fields.add(new StructField(f.toString(), type, true, Metadata.empty()));
            }
            Map<String, Object> request = Helper.request("aggregate", options);
            request.put("version", version);
            request.put("filters", taken);
            request.put("aggregates", aggregates);
            Map<String, Object> reply = Helper.get().call(request);
            Object values = reply.get("values");
            if (values == null) {
                return null;
            }
            answered = new AggregateScan(new StructType(fields.toArray(new StructField[0])), Helper.list(values));
            return answered;
        }

        private String column(Expression e) {
            if (e instanceof NamedReference n && n.fieldNames().length == 1
                    && java.util.Arrays.asList(schema.fieldNames()).contains(n.fieldNames()[0])) {
                return n.fieldNames()[0];
            }
            return null;
        }

        @Override
        public Scan build() {
            if (answered != null) {
                return answered;
            }
            Map<String, Object> read = new LinkedHashMap<>();
            read.put("options", Helper.request("", options).get("options"));
            read.put("version", version);
            List<String> columns = new ArrayList<>();
            read.put("columns", columns);
            read.put("filters", taken);
            if (partial != null) {
                for (Object c : Helper.list(partial.get("group_by"))) {
                    columns.add((String) c);
                }
                for (Object a : Helper.list(partial.get("aggregates"))) {
                    Object c = ((Map<?, ?>) a).get("col");
                    if (c != null && !columns.contains(c)) {
                        columns.add((String) c);
                    }
                }
                read.put("aggregate", partial);
                return new ColonnadeScan(read, partialSchema);
            }
            for (StructField f : schema.fields()) {
                columns.add(f.name());
            }
            return new ColonnadeScan(read, schema);
        }
    }

    /** A pushed filter in the helper's plain form, or null (never taken) for any other. */
    static Object plain(Filter f) {
        Map<String, Object> out = new LinkedHashMap<>();
        if (f instanceof Not n) {
            Object child = plain(n.child());
            if (child == null) {
                return null;
            }
            out.put("op", "not");
            out.put("child", child);
            return out;
        }
        String op;
        String column;
        Object value = null;
        List<Object> values = null;
        if (f instanceof EqualTo x) { op = "eq"; column = x.attribute(); value = x.value(); }
        else if (f instanceof EqualNullSafe x) { op = "eqns"; column = x.attribute(); value = x.value(); }
        else if (f instanceof GreaterThan x) { op = "gt"; column = x.attribute(); value = x.value(); }
        else if (f instanceof GreaterThanOrEqual x) { op = "ge"; column = x.attribute(); value = x.value(); }
        else if (f instanceof LessThan x) { op = "lt"; column = x.attribute(); value = x.value(); }
        else if (f instanceof LessThanOrEqual x) { op = "le"; column = x.attribute(); value = x.value(); }
        else if (f instanceof IsNull x) { op = "isnull"; column = x.attribute(); }
        else if (f instanceof IsNotNull x) { op = "notnull"; column = x.attribute(); }
        else if (f instanceof StringStartsWith x) { op = "startswith"; column = x.attribute(); value = x.value(); }
        else if (f instanceof StringEndsWith x) { op = "endswith"; column = x.attribute(); value = x.value(); }
        else if (f instanceof StringContains x) { op = "contains"; column = x.attribute(); value = x.value(); }
        else if (f instanceof In x) {
            op = "in";
            column = x.attribute();
            values = new ArrayList<>();
            for (Object v : x.values()) {
                values.add(value(v));
            }
        } else {
            return null;
        }
        out.put("op", op);
        out.put("col", column);
        if (values != null) {
            out.put("values", values);
        } else if (!op.equals("isnull") && !op.equals("notnull")) {
            out.put("value", value(value));
        }
        return out;
    }

    private static Object value(Object v) {
        if (v == null || v instanceof String || v instanceof Boolean || v instanceof Integer
                || v instanceof Long || v instanceof Short || v instanceof Byte || v instanceof Double
                || v instanceof Float) {
            return v;
        }
        Map<String, Object> tagged = new LinkedHashMap<>();
        if (v instanceof java.sql.Date d) {
            tagged.put("date", d.toLocalDate().toString());
        } else if (v instanceof LocalDate d) {
            tagged.put("date", d.toString());
        } else if (v instanceof BigDecimal d) {
            tagged.put("decimal", d.toPlainString());
        } else {
            tagged.put("unsupported", v.getClass().getName());
        }
        return tagged;
    }

    @Override
    public StructType readSchema() {
        return schema;
    }

    @Override
    public String description() {
        return "colonnade " + Helper.json(read);
    }

    @Override
    public Batch toBatch() {
        return this;
    }

    @Override
    public ColumnarSupportMode columnarSupportMode() {
        return ColumnarSupportMode.SUPPORTED;
    }

    @Override
    public InputPartition[] planInputPartitions() {
        Map<String, Object> request = new LinkedHashMap<>(read);
        request.put("op", "plan");
        Map<String, Object> reply = Helper.get().call(request);
        read.put("version", reply.get("version"));
        read.put("schema", reply.get("schema"));
        List<Object> groups = Helper.list(reply.get("partitions"));
        InputPartition[] out = new InputPartition[groups.size()];
        for (int i = 0; i < out.length; i++) {
            @SuppressWarnings("unchecked")
            Map<String, Object> g = (Map<String, Object>) groups.get(i);
            List<Object> hosts = Helper.list(g.get("hosts"));
            out[i] = new Group((String) g.get("group"), hosts.toArray(new String[0]));
        }
        return out;
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
        return new Factory(Helper.json(read), schema);
    }

    /** The segments one task reads (opaque to the JVM) and the nodes that hold them. */
    static final class Group implements InputPartition {
        final String group;
        private final String[] hosts;

        Group(String group, String[] hosts) {
            this.group = group;
            this.hosts = hosts;
        }

        @Override
        public String[] preferredLocations() {
            return hosts;
        }
    }

    static final class Factory implements PartitionReaderFactory, Serializable {
        private final String read;
        private final StructType schema;

        Factory(String read, StructType schema) {
            this.read = read;
            this.schema = schema;
        }

        @Override
        public PartitionReader<org.apache.spark.sql.catalyst.InternalRow> createReader(InputPartition partition) {
            throw new UnsupportedOperationException("colonnade reads columnar batches only");
        }

        @Override
        public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
            return new Reader(read, ((Group) partition).group, schema);
        }

        @Override
        public boolean supportColumnarReads(InputPartition partition) {
            return true;
        }
    }

    /**
     * One task's rows: one Arrow IPC stream per batch from the helper (each with its own schema:
     * a column stored as a dictionary comes as one), read batch by batch. A batch's vectors are
     * freed when the next is read.
     */
    static final class Reader implements PartitionReader<ColumnarBatch> {
        private static final RootAllocator ROOT = new RootAllocator(Long.MAX_VALUE);
        private final Socket socket;
        private final BufferAllocator allocator;
        private final Helper.Frames frames;
        private final StructType schema;
        private ArrowStreamReader stream;
        private ColumnarBatch batch;

        @SuppressWarnings("unchecked")
        Reader(String read, String group, StructType schema) {
            this.schema = schema;
            try {
                Map<String, Object> request = new com.fasterxml.jackson.databind.ObjectMapper().readValue(read, Map.class);
                request.put("op", "read");
                request.put("group", group);
                socket = Helper.get().open(request);
                allocator = ROOT.newChildAllocator("colonnade-read", 0, Long.MAX_VALUE);
                frames = new Helper.Frames(socket.getInputStream());
            } catch (IOException e) {
                throw new UncheckedIOException("colonnade: can't start a read", e);
            }
        }

        @Override
        public boolean next() throws IOException {
            while (true) {
                if (stream != null) {
                    if (stream.loadNextBatch()) {
                        batch = columns(stream);
                        return true;
                    }
                    closeStream();  // its end read: the next stream starts here
                }
                if (frames.atEnd()) {
                    return false;
                }
                stream = new ArrowStreamReader(frames.unclosable(), allocator);
            }
        }

        private ColumnarBatch columns(ArrowStreamReader reader) throws IOException {
            VectorSchemaRoot root = reader.getVectorSchemaRoot();
            List<FieldVector> vectors = root.getFieldVectors();
            ColumnVector[] columns = new ColumnVector[vectors.size()];
            for (int i = 0; i < columns.length; i++) {
                FieldVector v = vectors.get(i);
                DictionaryEncoding encoding = v.getField().getDictionary();
                if (encoding == null) {
                    columns[i] = Buffers.readable(v) ? new PlainColumn(schema.fields()[i].dataType(), v)
                        : new ArrowColumnVector(v);
                } else {
                    Dictionary d = reader.getDictionaryVectors().get(encoding.getId());
                    columns[i] = new DictionaryColumn(schema.fields()[i].dataType(), v, d.getVector());
                }
            }
            return new ColumnarBatch(columns, root.getRowCount());
        }

        private void closeStream() throws IOException {
            if (stream != null) {
                stream.close();
                stream = null;
                batch = null;
            }
        }

        @Override
        public ColumnarBatch get() {
            return batch;
        }

        @Override
        public void close() throws IOException {
            try {
                closeStream();
                allocator.close();
            } finally {
                socket.close();
            }
        }
    }
}
