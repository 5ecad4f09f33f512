package colonnade;

import org.apache.arrow.vector.FieldVector;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarArray;
import org.apache.spark.sql.vectorized.ColumnarMap;
import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * A column of a batch as its Arrow vector holds it (numbers, dates, timestamps, booleans,
 * strings, binaries: see {@link Buffers#readable}), read from the vector's memory; its nulls
 * found once per batch.
 */
final class PlainColumn extends ColumnVector {
    private final boolean[] nulls;  // null when there are none
    private final int nullCount;
    private final long data;
    private final long offsets;  // strings and binaries

    PlainColumn(DataType type, FieldVector vector) {
        super(type);
        int rows = vector.getValueCount();
        nulls = Buffers.nulls(vector, rows);
        int count = 0;
        if (nulls != null) {
            for (boolean n : nulls) {
                count += n ? 1 : 0;
            }
        }
        nullCount = count;
        data = rows == 0 ? 0 : Buffers.values(vector);
        offsets = rows == 0 ? 0 : Buffers.offsets(vector);
    }

    @Override
    public void close() {
    }

    @Override
    public boolean hasNull() {
        return nullCount > 0;
    }

    @Override
    public int numNulls() {
        return nullCount;
    }

    @Override
    public boolean isNullAt(int rowId) {
        return nulls != null && nulls[rowId];
    }

    @Override public boolean getBoolean(int rowId) { return Buffers.bit(data, rowId); }
    @Override public byte getByte(int rowId) { return Platform.getByte(null, data + rowId); }
    @Override public short getShort(int rowId) { return Platform.getShort(null, data + 2L * rowId); }
    @Override public int getInt(int rowId) { return Platform.getInt(null, data + 4L * rowId); }
    @Override public long getLong(int rowId) { return Platform.getLong(null, data + 8L * rowId); }
    @Override public float getFloat(int rowId) { return Platform.getFloat(null, data + 4L * rowId); }
    @Override public double getDouble(int rowId) { return Platform.getDouble(null, data + 8L * rowId); }

    @Override
    public Decimal getDecimal(int rowId, int precision, int scale) {
        throw new UnsupportedOperationException("colonnade: decimals are read through Arrow's own vectors");
    }

    @Override
    public UTF8String getUTF8String(int rowId) {
        return isNullAt(rowId) ? null : Buffers.string(data, offsets, rowId);
    }

    @Override
    public byte[] getBinary(int rowId) {
        return isNullAt(rowId) ? null : Buffers.binary(data, offsets, rowId);
    }

    @Override
    public ColumnarArray getArray(int rowId) {
        throw new UnsupportedOperationException("colonnade columns hold no arrays");
    }

    @Override
    public ColumnarMap getMap(int ordinal) {
        throw new UnsupportedOperationException("colonnade columns hold no maps");
    }

    @Override
    public ColumnVector getChild(int ordinal) {
        throw new UnsupportedOperationException("colonnade columns hold no structs");
    }
}
