// Db.java — a JDBC connection from DATABASE_URL, which pgoutbox and psql
// read as postgresql://user[:password]@host[:port]/db (a jdbc: URL passes
// through).
import java.net.URI;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.util.Properties;

final class Db {
    static Connection connect() throws SQLException {
        String url = System.getenv("DATABASE_URL");
        if (url == null)
            throw new SQLException("DATABASE_URL is not set");
        if (url.startsWith("jdbc:"))
            return DriverManager.getConnection(url);
        URI uri = URI.create(url);
        Properties props = new Properties();
        String user = uri.getRawUserInfo();
        if (user != null) {
            String[] parts = user.split(":", 2);
            props.setProperty("user", URLDecoder.decode(parts[0], StandardCharsets.UTF_8));
            if (parts.length == 2)
                props.setProperty("password", URLDecoder.decode(parts[1], StandardCharsets.UTF_8));
        }
        String port = uri.getPort() < 0 ? "" : ":" + uri.getPort();
        return DriverManager.getConnection(
                "jdbc:postgresql://" + uri.getHost() + port + uri.getRawPath(), props);
    }
}
