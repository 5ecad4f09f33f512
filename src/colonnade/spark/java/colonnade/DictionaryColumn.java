package colonnade;

import org.apache.arrow.vector.BaseFixedWidthVector;
import org.apache.arrow.vector.BaseIntVector;
import org.apache.arrow.vector.FieldVector;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;
import org.apache.spark.sql.vectorized.ArrowColumnVector;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarArray;
import org.apache.spark.sql.vectorized.ColumnarMap;
import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * A column sent as it was stored, dictionary-encoded (strings or numbers, indices of any
 * width): each row's value is looked up in the batch's dictionary when Spark asks for it (no
 * decoding, as Spark's Parquet reader does with dictionary pages). The vectors belong to the
 * batch's stream reader.
 *
 * <p>Made once per batch, so that a row's lookup is a few array reads (Spark asks row by row:
 * whether it is null, then its value): each row's index (one copy of the index buffer), which
 * rows are null (null indices, and indices of a null value), a numeric dictionary's values as a
 * Java array; strings and binaries are read from the dictionary's memory ({@link Buffers}).
 */
final class DictionaryColumn extends ColumnVector {
    private final ArrowColumnVector values;  // decimals
    private final int[] ids;  // each row's index in the dictionary (0 for a null row)
    private final boolean[] nulls;  // null rows; null when there are none
    private final int nullCount;
    private final long[] longs;  // an integer, date or timestamp dictionary's values
    private final double[] doubles;  // a float or double dictionary's values
    private final long data;  // the dictionary's values (strings, binaries, booleans)
    private final long offsets;  // the dictionary's offsets (strings, binaries)

    DictionaryColumn(DataType type, FieldVector indices, FieldVector dictionary) {
        super(type);
        this.values = new ArrowColumnVector(dictionary);
        int rows = indices.getValueCount();
        int size = dictionary.getValueCount();
        ids = indexes(indices, rows);
        boolean[] valueNulls = Buffers.nulls(dictionary, size);
        boolean[] rowNulls = Buffers.nulls(indices, rows);
        int count = 0;
        if (rowNulls != null || valueNulls != null) {
            if (rowNulls == null) {
                rowNulls = new boolean[rows];
            }
            for (int i = 0; i < rows; i++) {
                if (rowNulls[i]) {
                    ids[i] = 0;
                } else if (valueNulls != null && valueNulls[ids[i]]) {
                    rowNulls[i] = true;
                }
                count += rowNulls[i] ? 1 : 0;
            }
        }
        nulls = count > 0 ? rowNulls : null;
        nullCount = count;
        int slots = Math.max(size, 1);  // a null row's index 0 is read safely
        long address = size == 0 ? 0 : Buffers.values(dictionary);
        long[] l = null;
        double[] f = null;
        if (Buffers.readable(dictionary) && Buffers.offsets(dictionary) == 0
                && !(dictionary instanceof org.apache.arrow.vector.BitVector)) {
            int width = ((BaseFixedWidthVector) dictionary).getTypeWidth();
            if (type instanceof FloatType || type instanceof DoubleType) {
                f = new double[slots];
                for (int d = 0; d < size; d++) {
                    f[d] = width == 4 ? Platform.getFloat(null, address + 4L * d)
                        : Platform.getDouble(null, address + 8L * d);
                }
            } else {
                l = new long[slots];
                for (int d = 0; d < size; d++) {
                    l[d] = width == 1 ? Platform.getByte(null, address + d)
                        : width == 2 ? Platform.getShort(null, address + 2L * d)
                        : width == 4 ? Platform.getInt(null, address + 4L * d)
                        : Platform.getLong(null, address + 8L * d);
                }
            }
        }
        longs = l;
        doubles = f;
        data = address;
        offsets = size == 0 ? 0 : Buffers.offsets(dictionary);
    }

    /** Each row's index, copied out of the index buffer. */
    private static int[] indexes(FieldVector indices, int rows) {
        int[] out = new int[rows];
        if (rows == 0) {
            return out;
        }
        int width = indices instanceof BaseFixedWidthVector ? ((BaseFixedWidthVector) indices).getTypeWidth() : 0;
        long address = width == 1 || width == 2 || width == 4 ? Buffers.values(indices) : 0;
        if (width == 4) {
            Platform.copyMemory(null, address, out, Platform.INT_ARRAY_OFFSET, 4L * rows);
        } else if (width == 2) {
            for (int i = 0; i < rows; i++) {
                out[i] = Platform.getShort(null, address + 2L * i);
            }
        } else if (width == 1) {
            for (int i = 0; i < rows; i++) {
                out[i] = Platform.getByte(null, address + i);
            }
        } else {
            BaseIntVector any = (BaseIntVector) indices;
            for (int i = 0; i < rows; i++) {
                out[i] = indices.isNull(i) ? 0 : (int) any.getValueAsLong(i);
            }
        }
        return out;
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

    @Override public boolean getBoolean(int rowId) { return Buffers.bit(data, ids[rowId]); }
    @Override public byte getByte(int rowId) { return (byte) longs[ids[rowId]]; }
    @Override public short getShort(int rowId) { return (short) longs[ids[rowId]]; }
    @Override public int getInt(int rowId) { return (int) longs[ids[rowId]]; }
    @Override public long getLong(int rowId) { return longs[ids[rowId]]; }
    @Override public float getFloat(int rowId) { return (float) doubles[ids[rowId]]; }
    @Override public double getDouble(int rowId) { return doubles[ids[rowId]]; }

    @Override
    public Decimal getDecimal(int rowId, int precision, int scale) {
        return isNullAt(rowId) ? null : values.getDecimal(ids[rowId], precision, scale);
    }

    @Override
    public UTF8String getUTF8String(int rowId) {
        return isNullAt(rowId) ? null : Buffers.string(data, offsets, ids[rowId]);
    }

    @Override
    public byte[] getBinary(int rowId) {
        return isNullAt(rowId) ? null : Buffers.binary(data, offsets, ids[rowId]);
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
