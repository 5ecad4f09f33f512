package colonnade;

import java.util.Map;

import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2;
import org.apache.spark.sql.execution.datasources.v2.python.PythonTable;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * {@code format("colonnade")} when this jar is on Spark's class path (Spark finds a source named
 * {@code X} as the class {@code X.DefaultSource}): reads are planned and served by Colonnade's
 * helper process and handed to Spark as Arrow column vectors, with the columns the query needs
 * and the filters it pushes; writes, and everything else, are the Python data source's (the
 * class registered as {@code colonnade} by {@code colonnade.spark.register}).
 */
public class DefaultSource extends PythonDataSourceV2 {
    /** The version the schema was read at: a DataFrame reads it whenever it is run. */
    private Object version;

    @Override
    public StructType inferSchema(CaseInsensitiveStringMap options) {
        Map<String, Object> reply = Helper.get().call(Helper.request("schema", options));
        version = reply.get("version");
        return (StructType) DataType.fromJson(Helper.json(reply.get("schema")));
    }

    @Override
    public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
        return new ColonnadeTable(this, schema, version);
    }

    /**
     * The Python data source's table, whose scans are ours. A table of a schema the read was
     * given ({@code .schema(...)}: no version pinned yet) has it checked by the helper against
     * the dataset when its first scan is planned (same names and types: the reader hands Spark
     * the stored values as they are), which pins the version then.
     */
    static final class ColonnadeTable extends PythonTable {
        private final StructType schema;
        private Object version;

        ColonnadeTable(PythonDataSourceV2 source, StructType schema, Object version) {
            super(source, "colonnade", schema);
            this.schema = schema;
            this.version = version;
        }

        @Override
        public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
            synchronized (this) {
                if (version == null) {
                    Map<String, Object> request = Helper.request("schema", options);
                    request.put("given", Helper.parse(schema.json()));
                    version = Helper.get().call(request).get("version");
                }
            }
            return new ColonnadeScan.Builder(schema, options, version);
        }
    }
}
