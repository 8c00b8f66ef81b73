// Producer.java — pgoutbox from Java with JDBC (docs/examples.md): an
// order and its event in one transaction, then three orders and their
// events with one send_batch call.  DATABASE_URL names the database
// (postgresql://user@host:port/db, or a jdbc: URL).
import java.math.BigDecimal;
import java.sql.Array;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;

public class Producer {
    public static void main(String[] args) throws SQLException {
        try (Connection conn = Db.connect()) {
            conn.setAutoCommit(false);
            // The order and its event commit together, or neither does.
            try (PreparedStatement order = conn.prepareStatement(
                         "INSERT INTO orders (id, total) VALUES (?, ?)");
                 PreparedStatement send = conn.prepareStatement(
                         "SELECT pgoutbox.send('orders', ?, 'order.created', ?::jsonb)")) {
                order.setLong(1, 1);
                order.setBigDecimal(2, new BigDecimal("9.90"));
                order.executeUpdate();
                send.setString(1, "1");
                send.setString(2, "{\"order_id\": 1, \"total\": \"9.90\"}");
                try (ResultSet rs = send.executeQuery()) {
                    rs.next();
                    conn.commit();
                    System.out.println("order 1: event " + rs.getLong(1));
                }
            } catch (SQLException e) {
                conn.rollback();
                throw e;
            }

            // Many at once: one call, the events in array order.  The casts
            // pick send_batch(topic text, keys text[], types text[],
            // payloads jsonb[]).
            String[] ids = {"2", "3", "4"};
            String[] totals = {"5.00", "7.50", "1.25"};
            String[] types = new String[ids.length];
            String[] payloads = new String[ids.length];
            try (PreparedStatement order = conn.prepareStatement(
                         "INSERT INTO orders (id, total) VALUES (?, ?)");
                 PreparedStatement send = conn.prepareStatement(
                         "SELECT pgoutbox.send_batch(?::text, ?::text[], ?::text[], ?::jsonb[])")) {
                for (int i = 0; i < ids.length; i++) {
                    order.setLong(1, Long.parseLong(ids[i]));
                    order.setBigDecimal(2, new BigDecimal(totals[i]));
                    order.addBatch();
                    types[i] = "order.created";
                    payloads[i] = "{\"order_id\": " + ids[i] + ", \"total\": \"" + totals[i] + "\"}";
                }
                order.executeBatch();
                send.setString(1, "orders");
                send.setArray(2, conn.createArrayOf("text", ids));
                send.setArray(3, conn.createArrayOf("text", types));
                send.setArray(4, conn.createArrayOf("text", payloads));
                try (ResultSet rs = send.executeQuery()) {
                    rs.next();
                    Array events = rs.getArray(1);
                    conn.commit();
                    System.out.println("orders 2-4: events "
                            + java.util.Arrays.toString((Long[]) events.getArray()));
                }
            } catch (SQLException e) {
                conn.rollback();
                throw e;
            }
        }
    }
}
