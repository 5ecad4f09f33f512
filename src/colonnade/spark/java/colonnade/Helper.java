package colonnade;

import java.io.BufferedReader;
import java.io.DataInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;

/**
 * Colonnade's helper process, one per JVM: {@code python -m colonnade.spark.helper}, started on
 * first use with the interpreter PySpark workers use ({@code PYSPARK_PYTHON}, else
 * {@code python3}). It listens on a loopback port and prints the port and a secret; it exits
 * when this JVM does (its standard input closes). Each request is a connection: the secret and
 * one JSON line; the answer is frames of {@code [kind byte][int32 length][payload]}: {@code j}
 * a JSON answer, {@code d} bytes of an Arrow IPC stream, {@code z} its end, {@code e} an error.
 */
final class Helper {
    private static final ObjectMapper JSON = new ObjectMapper();
    /**
     * The system property naming this JVM's helper ({@code "PORT SECRET PID"}). Spark loads
     * this class more than once in one JVM (the session's {@code ADD JAR} and its tasks each
     * have a class loader): they find the one helper through it. The name, a string literal,
     * is one object JVM-wide, so it is also the lock they share.
     */
    private static final String SHARED = "colonnade.spark.helper";
    private static Helper instance;
    /** The helper this copy of the class started: kept, as its standard input stays open while it is. */
    private static Process started;

    private final long pid;
    private final int port;
    private final String secret;

    private Helper(long pid, int port, String secret) {
        this.pid = pid;
        this.port = port;
        this.secret = secret;
    }

    static Helper get() {
        synchronized (SHARED) {
            if (instance != null && instance.alive()) {
                return instance;
            }
            String shared = System.getProperty(SHARED);
            if (shared != null) {
                String[] parts = shared.split(" ");
                Helper found = new Helper(Long.parseLong(parts[2]), Integer.parseInt(parts[0]), parts[1]);
                if (found.alive()) {
                    return instance = found;
                }
            }
            instance = start();
            System.setProperty(SHARED, instance.port + " " + instance.secret + " " + instance.pid);
            return instance;
        }
    }

    private boolean alive() {
        return ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false);
    }

    private static Helper start() {
        String python = System.getenv("PYSPARK_PYTHON");
        if (python == null || python.isEmpty()) {
            python = "python3";
        }
        ProcessBuilder builder = new ProcessBuilder(python, "-m", "colonnade.spark.helper");
        builder.redirectError(ProcessBuilder.Redirect.INHERIT);
        try {
            Process process = builder.start();
            BufferedReader out = new BufferedReader(
                new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
            String line = out.readLine();
            if (line == null) {
                throw new IllegalStateException("colonnade: the helper process (" + python
                    + " -m colonnade.spark.helper) exited at start: is colonnade installed there?");
            }
            String[] parts = line.trim().split(" ");
            started = process;
            return new Helper(process.pid(), Integer.parseInt(parts[0]), parts[1]);
        } catch (IOException e) {
            throw new UncheckedIOException("colonnade: can't start " + python + " -m colonnade.spark.helper", e);
        }
    }

    static Map<String, Object> request(String op, Map<String, String> options) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("op", op);
        Map<String, String> plain = new LinkedHashMap<>();
        for (Map.Entry<String, String> e : options.entrySet()) {
            plain.put(e.getKey(), e.getValue());
        }
        out.put("options", plain);
        return out;
    }

    static String json(Object value) {
        try {
            return JSON.writeValueAsString(value);
        } catch (JsonProcessingException e) {
            throw new IllegalArgumentException(e);
        }
    }

    /** A JSON text as Java values. */
    static Object parse(String text) {
        try {
            return JSON.readValue(text, Object.class);
        } catch (JsonProcessingException e) {
            throw new IllegalArgumentException(e);
        }
    }

    /** A connection that has sent {@code request}; its answer is to be read. */
    Socket open(Map<String, Object> request) throws IOException {
        Socket socket = new Socket(InetAddress.getLoopbackAddress(), port);
        OutputStream out = socket.getOutputStream();
        out.write((secret + "\n" + json(request) + "\n").getBytes(StandardCharsets.UTF_8));
        out.flush();
        return socket;
    }

    /** A request answered by one JSON object; the helper's error as an exception. */
    @SuppressWarnings("unchecked")
    Map<String, Object> call(Map<String, Object> request) {
        try (Socket socket = open(request)) {
            DataInputStream in = new DataInputStream(socket.getInputStream());
            int kind = in.read();
            byte[] payload = new byte[in.readInt()];
            in.readFully(payload);
            String text = new String(payload, StandardCharsets.UTF_8);
            if (kind == 'e') {  // a standard type: PySpark shows it as its message alone
                throw new IllegalArgumentException(text);
            }
            return JSON.readValue(text, Map.class);
        } catch (IOException e) {
            throw new UncheckedIOException("colonnade: the helper process did not answer", e);
        }
    }

    @SuppressWarnings("unchecked")
    static List<Object> list(Object value) {
        return value == null ? new ArrayList<>() : (List<Object>) value;
    }

    /** The Arrow IPC stream of a read: the bytes of {@code d} frames, then end of stream. */
    static final class Frames extends InputStream {
        private final DataInputStream in;
        private int left;
        private boolean done;

        Frames(InputStream in) {
            this.in = new DataInputStream(new java.io.BufferedInputStream(in, 1 << 16));
        }

        /** Whether the answer is over (its end frame read), waiting for the next frame. */
        boolean atEnd() throws IOException {
            return !fill();
        }

        /** This stream, for a reader that closes what it reads when it is done with it. */
        InputStream unclosable() {
            return new java.io.FilterInputStream(this) {
                @Override
                public void close() {
                }
            };
        }

        private boolean fill() throws IOException {
            while (left == 0 && !done) {
                int kind = in.read();
                if (kind < 0) {
                    throw new EOFException("colonnade: the helper process closed a read early");
                }
                int length = in.readInt();
                if (kind == 'd') {
                    left = length;
                } else if (kind == 'z') {
                    done = true;
                } else {
                    byte[] payload = new byte[length];
                    in.readFully(payload);
                    // a standard type: the driver deserializes a task's failure without our jar
                    throw new IOException(new String(payload, StandardCharsets.UTF_8));
                }
            }
            return left > 0;
        }

        @Override
        public int read() throws IOException {
            if (!fill()) {
                return -1;
            }
            left--;
            return in.read();
        }

        @Override
        public int read(byte[] b, int off, int len) throws IOException {
            if (len == 0) {
                return 0;
            }
            if (!fill()) {
                return -1;
            }
            int n = in.read(b, off, Math.min(len, left));
            if (n < 0) {
                throw new EOFException("colonnade: the helper process closed a read early");
            }
            left -= n;
            return n;
        }
    }
}
