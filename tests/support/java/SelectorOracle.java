import com.alibaba.fastjson.JSON;
import com.alibaba.fastjson.JSONArray;
import com.alibaba.fastjson.JSONObject;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.HashMap;
import java.util.Map;
import org.apache.rocketmq.filter.expression.BooleanExpression;
import org.apache.rocketmq.filter.expression.EvaluationContext;
import org.apache.rocketmq.filter.parser.SelectorParser;

/**
 * Usage: SelectorOracle CASES_FILE
 *
 * Each line of CASES_FILE is a JSON array [expression, {property: value, ...}]. For each, prints
 * one line: PARSE_ERROR when SelectorParser.parse (the broker's SqlFilter.compile) throws, else
 * what evaluate gives with the properties as the message's: TRUE, FALSE, NULL, ERROR (it threw,
 * which the broker counts as no match) or VALUE (anything else).
 */
public class SelectorOracle {
    public static void main(String[] args) throws Exception {
        StringBuilder out = new StringBuilder();
        for (String line : Files.readAllLines(Paths.get(args[0]), StandardCharsets.UTF_8)) {
            JSONArray item = JSON.parseArray(line);
            String expression = item.getString(0);
            JSONObject given = item.getJSONObject(1);
            final Map<String, String> props = new HashMap<String, String>();
            for (String key : given.keySet()) {
                props.put(key, given.getString(key));
            }
            BooleanExpression compiled;
            try {
                compiled = SelectorParser.parse(expression);
            } catch (Throwable e) {
                out.append("PARSE_ERROR\n");
                continue;
            }
            EvaluationContext context = new EvaluationContext() {
                public Object get(String name) {
                    return props.get(name);
                }

                public Map<String, Object> keyValues() {
                    return null;
                }
            };
            String result;
            try {
                Object value = compiled.evaluate(context);
                if (value == null) {
                    result = "NULL";
                } else if (value instanceof Boolean) {
                    result = ((Boolean) value) ? "TRUE" : "FALSE";
                } else {
                    result = "VALUE";
                }
            } catch (Throwable e) {
                result = "ERROR";
            }
            out.append(result).append('\n');
        }
        System.out.print(out);
    }
}
