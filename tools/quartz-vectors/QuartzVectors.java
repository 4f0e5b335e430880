// Prints the fire times Quartz's CronExpression gives, as JSON lines, for test vectors.
//
// Input (stdin), one case per line, tab-separated:
//   expression <TAB> zone id <TAB> start (epoch milliseconds) <TAB> number of fires
// Output (stdout), one JSON object per input line:
//   {"expression": ..., "timezone": ..., "start_ms": ..., "outcome": "ok" | "invalid" | "eval_error" | "timeout",
//    "fires_ms": [...], "message": ...}
// "invalid": the constructor threw ParseException. "eval_error": getTimeAfter threw.
// "timeout": getTimeAfter did not return within the time limit (Quartz loops forever on some input).
//
// Build and run: see docs/cron.md ("Test vectors").
import java.text.ParseException;
import java.util.ArrayList;
import java.util.Date;
import java.util.List;
import java.util.TimeZone;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;

import org.quartz.CronExpression;

public final class QuartzVectors {
    private static final long TIME_LIMIT_MS = 2000;

    private static ExecutorService pool = newPool();

    private static ExecutorService newPool() {
        return Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r);
            t.setDaemon(true);
            return t;
        });
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        StringBuilder out = new StringBuilder();
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) {
                continue;
            }
            String[] parts = line.split("\t", -1);
            out.setLength(0);
            answer(parts[0], parts[1], Long.parseLong(parts[2]), Integer.parseInt(parts[3]), out);
            System.out.println(out);
        }
        System.out.flush();
    }

    private static void answer(String expr, String zone, long startMs, int count, StringBuilder out) {
        out.append("{\"expression\":").append(quote(expr));
        out.append(",\"timezone\":").append(quote(zone));
        out.append(",\"start_ms\":").append(startMs);
        CronExpression cron;
        try {
            cron = new CronExpression(expr);
        } catch (ParseException | RuntimeException e) {
            out.append(",\"outcome\":\"invalid\",\"message\":").append(quote(String.valueOf(e.getMessage()))).append('}');
            return;
        }
        cron.setTimeZone(TimeZone.getTimeZone(zone));
        Future<List<Long>> future = pool.submit(() -> fires(cron, startMs, count));
        try {
            List<Long> fires = future.get(TIME_LIMIT_MS, TimeUnit.MILLISECONDS);
            out.append(",\"outcome\":\"ok\",\"fires_ms\":").append(fires).append('}');
        } catch (TimeoutException e) {
            future.cancel(true);
            pool.shutdownNow();
            pool = newPool();  // the stuck thread is a daemon; abandon it
            out.append(",\"outcome\":\"timeout\"}");
        } catch (Exception e) {
            Throwable cause = e.getCause() == null ? e : e.getCause();
            out.append(",\"outcome\":\"eval_error\",\"message\":").append(quote(cause.toString())).append('}');
        }
    }

    private static List<Long> fires(CronExpression cron, long startMs, int count) {
        List<Long> result = new ArrayList<>();
        Date after = new Date(startMs);
        for (int i = 0; i < count; i++) {
            Date next = cron.getTimeAfter(after);
            if (next == null) {
                break;
            }
            result.add(next.getTime());
            after = next;
        }
        return result;
    }

    private static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }
}
