package colonnade;

import java.io.Serializable;
import java.time.LocalDate;
import java.util.List;
import java.util.Map;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * An aggregation Spark pushed whole ({@code count}, {@code min}, {@code max}, no grouping) and
 * that segment statistics decided at planning: one row, no chunk read (as a Colonnade SQL query
 * answers {@code count(col)} from metadata).
 */
final class AggregateScan implements Scan, Batch {
    private final StructType schema;
    private final Object[] values;

    AggregateScan(StructType schema, List<Object> answers) {
        this.schema = schema;
        this.values = new Object[answers.size()];
        for (int i = 0; i < values.length; i++) {
            values[i] = plain(answers.get(i), schema.fields()[i].dataType());
        }
    }

    /** Whether a value of this Spark type comes back from the helper as something we take. */
    static boolean supported(DataType type) {
        return type == DataTypes.LongType || type == DataTypes.IntegerType || type == DataTypes.ShortType
            || type == DataTypes.ByteType || type == DataTypes.DoubleType || type == DataTypes.FloatType
            || type == DataTypes.StringType || type == DataTypes.DateType;
    }

    /** An answer as a serializable Java value of Spark's internal representation (not yet UTF8). */
    private static Object plain(Object v, DataType type) {
        if (v == null) {
            return null;
        }
        if (type == DataTypes.LongType) return ((Number) v).longValue();
        if (type == DataTypes.IntegerType) return ((Number) v).intValue();
        if (type == DataTypes.ShortType) return ((Number) v).shortValue();
        if (type == DataTypes.ByteType) return ((Number) v).byteValue();
        if (type == DataTypes.DoubleType) return ((Number) v).doubleValue();
        if (type == DataTypes.FloatType) return ((Number) v).floatValue();
        if (type == DataTypes.DateType) {
            return (int) LocalDate.parse((String) ((Map<?, ?>) v).get("date")).toEpochDay();
        }
        return v.toString();
    }

    @Override
    public StructType readSchema() {
        return schema;
    }

    @Override
    public String description() {
        return "colonnade aggregate from metadata " + Helper.json(values);
    }

    @Override
    public Batch toBatch() {
        return this;
    }

    @Override
    public InputPartition[] planInputPartitions() {
        return new InputPartition[] {new Row(values)};
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
        return new Factory();
    }

    static final class Row implements InputPartition {
        final Object[] values;

        Row(Object[] values) {
            this.values = values;
        }
    }

    static final class Factory implements PartitionReaderFactory, Serializable {
        @Override
        public PartitionReader<InternalRow> createReader(InputPartition partition) {
            Object[] values = ((Row) partition).values.clone();
            for (int i = 0; i < values.length; i++) {
                if (values[i] instanceof String s) {
                    values[i] = UTF8String.fromString(s);
                }
            }
            InternalRow row = new GenericInternalRow(values);
            return new PartitionReader<InternalRow>() {
                private boolean done;

                @Override
                public boolean next() {
                    if (done) {
                        return false;
                    }
                    done = true;
                    return true;
                }

                @Override
                public InternalRow get() {
                    return row;
                }

                @Override
                public void close() {
                }
            };
        }
    }
}
