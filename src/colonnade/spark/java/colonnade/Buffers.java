package colonnade;

import org.apache.arrow.vector.BaseFixedWidthVector;
import org.apache.arrow.vector.BaseVariableWidthVector;
import org.apache.arrow.vector.BitVector;
import org.apache.arrow.vector.FieldVector;
import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * A batch's Arrow vectors read straight from their memory (little-endian, as Arrow lays them out
 * here), as Spark's off-heap column vectors read theirs: Arrow's own accessors check bounds and
 * reference counts on every value, which made up most of a read's time in the JVM when Spark
 * asks row by row. The memory stays valid until the batch's stream reader loads the next batch,
 * and Spark copies what it keeps before asking for it.
 */
final class Buffers {
    private Buffers() {
    }

    /** Which of the first {@code rows} rows of {@code v} are null; null when none is. */
    static boolean[] nulls(FieldVector v, int rows) {
        // a vector read without a validity buffer has no nulls (Arrow leaves it out then)
        if (rows == 0 || v.getValidityBuffer().capacity() == 0 || v.getNullCount() == 0) {
            return null;
        }
        long bits = v.getValidityBuffer().memoryAddress();
        boolean[] out = new boolean[rows];
        for (int i = 0; i < rows; i++) {
            out[i] = ((Platform.getByte(null, bits + (i >>> 3)) >> (i & 7)) & 1) == 0;
        }
        return out;
    }

    /** The address of a fixed-width vector's values (a boolean vector's bits). */
    static long values(FieldVector v) {
        return v.getDataBuffer().memoryAddress();
    }

    /** The address of a variable-width vector's offsets (int32), or 0 for other vectors. */
    static long offsets(FieldVector v) {
        return v instanceof BaseVariableWidthVector ? v.getOffsetBuffer().memoryAddress() : 0;
    }

    /** Whether the vector is one this class reads (fixed width but decimals, booleans, strings and binaries). */
    static boolean readable(FieldVector v) {
        return v instanceof BitVector || v instanceof BaseVariableWidthVector
            || (v instanceof BaseFixedWidthVector && ((BaseFixedWidthVector) v).getTypeWidth() <= 8);
    }

    static boolean bit(long address, int i) {
        return ((Platform.getByte(null, address + (i >>> 3)) >> (i & 7)) & 1) != 0;
    }

    static UTF8String string(long data, long offsets, int i) {
        int start = Platform.getInt(null, offsets + 4L * i);
        return UTF8String.fromAddress(null, data + start, Platform.getInt(null, offsets + 4L * i + 4) - start);
    }

    static byte[] binary(long data, long offsets, int i) {
        int start = Platform.getInt(null, offsets + 4L * i);
        byte[] out = new byte[Platform.getInt(null, offsets + 4L * i + 4) - start];
        Platform.copyMemory(null, data + start, out, Platform.BYTE_ARRAY_OFFSET, out.length);
        return out;
    }
}
