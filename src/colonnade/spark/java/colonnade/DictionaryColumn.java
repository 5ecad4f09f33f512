package colonnade;

import org.apache.arrow.vector.BaseIntVector;
import org.apache.arrow.vector.FieldVector;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.vectorized.ArrowColumnVector;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarArray;
import org.apache.spark.sql.vectorized.ColumnarMap;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * A column sent as it was stored, dictionary-encoded (strings or numbers, indices of any
 * width): each row's value is looked up in the batch's dictionary when Spark asks for it (no
 * decoding, as Spark's Parquet reader does with dictionary pages). The vectors belong to the
 * batch's stream reader.
 */
final class DictionaryColumn extends ColumnVector {
    private final BaseIntVector indices;
    private final FieldVector indexVector;
    private final ArrowColumnVector values;

    DictionaryColumn(DataType type, FieldVector indices, FieldVector dictionary) {
        super(type);
        this.indexVector = indices;
        this.indices = (BaseIntVector) indices;
        this.values = new ArrowColumnVector(dictionary);
    }

    private int at(int rowId) {
        return (int) indices.getValueAsLong(rowId);
    }

    @Override
    public void close() {
    }

    @Override
    public boolean hasNull() {
        return indexVector.getNullCount() > 0 || values.hasNull();
    }

    @Override
    public int numNulls() {
        if (!values.hasNull()) {
            return indexVector.getNullCount();
        }
        int n = 0;
        for (int i = 0; i < indexVector.getValueCount(); i++) {
            n += isNullAt(i) ? 1 : 0;
        }
        return n;
    }

    @Override
    public boolean isNullAt(int rowId) {
        return indexVector.isNull(rowId) || values.isNullAt(at(rowId));
    }

    @Override public boolean getBoolean(int rowId) { return values.getBoolean(at(rowId)); }
    @Override public byte getByte(int rowId) { return values.getByte(at(rowId)); }
    @Override public short getShort(int rowId) { return values.getShort(at(rowId)); }
    @Override public int getInt(int rowId) { return values.getInt(at(rowId)); }
    @Override public long getLong(int rowId) { return values.getLong(at(rowId)); }
    @Override public float getFloat(int rowId) { return values.getFloat(at(rowId)); }
    @Override public double getDouble(int rowId) { return values.getDouble(at(rowId)); }

    @Override
    public Decimal getDecimal(int rowId, int precision, int scale) {
        return isNullAt(rowId) ? null : values.getDecimal(at(rowId), precision, scale);
    }

    @Override
    public UTF8String getUTF8String(int rowId) {
        return isNullAt(rowId) ? null : values.getUTF8String(at(rowId));
    }

    @Override
    public byte[] getBinary(int rowId) {
        return isNullAt(rowId) ? null : values.getBinary(at(rowId));
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
