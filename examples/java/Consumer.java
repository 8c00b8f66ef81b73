// Consumer.java — applies events exactly once with pgoutbox's inbox
// (docs/examples.md): each event's id is claimed in the transaction that
// writes its effect, so a redelivered event changes nothing.  The events
// come as NDJSON on stdin, as `pgoutbox relay --sink exec` hands them
// over; from a broker, claim the same id the same way.  PostgreSQL reads
// the JSON (->>), so no JSON library is needed.  Exit 0 acks.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;

public class Consumer {
    public static void main(String[] args) throws Exception {
        try (Connection conn = Db.connect();
             BufferedReader in = new BufferedReader(
                     new InputStreamReader(System.in, StandardCharsets.UTF_8));
             PreparedStatement claim = conn.prepareStatement(
                     "SELECT pgoutbox.inbox_claim('shipping', ?::jsonb->>'id')");
             PreparedStatement ship = conn.prepareStatement(
                     "INSERT INTO shipments (order_id) VALUES ((?::jsonb #>> '{payload,order_id}')::bigint)")) {
            conn.setAutoCommit(false);
            for (String line; (line = in.readLine()) != null; ) {
                if (line.isBlank())
                    continue;
                try {
                    claim.setString(1, line);
                    boolean first;
                    try (ResultSet rs = claim.executeQuery()) {
                        rs.next();
                        first = rs.getBoolean(1);
                    }
                    if (first) {
                        ship.setString(1, line);
                        ship.executeUpdate();
                    }
                    conn.commit();
                    System.err.println(first ? "shipped: " + line : "a duplicate, skipped: " + line);
                } catch (Exception e) {
                    conn.rollback();
                    throw e;
                }
            }
        }
    }
}
