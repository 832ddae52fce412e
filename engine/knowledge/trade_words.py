"""The English a programmer's documentation uses for everyday Japanese words of the trade.

JMdict (``glossary.py``) gives a word's general senses: 取り消す is "cancel", "withdraw",
"retract", where a manual says "undo"; 取り出す "take out", "fetch", where it says "extract";
結合 "combination", "union", where it says "join"; 有効 "valid", where it says "enabled". A
Japanese question about an English page then meets every word of the page but its verb, and
the page's other sections win, or the page meets too few of the question's words to be on
the site. These words come after the dictionary's: the search looks for a word's first English
forms only (``query.ENGLISH_PER_WORD``), which stay the dictionary's, while the needs
(``needs.py``) are met by any of them. (Searched too, the trade's first word changed the plans
of six Japanese questions of the eval files against these: two for the better, four for the
worse, by the passages it pushed out of the first eight.)

Kept to words whose trade sense the dictionary lacks or files late, each with the English
that reference pages write: a verb as its base form (the needs match its endings), no
stopword such as "get", and no short form that begins other words, as "temp" does
"template". A word is looked up as the question writes it, longest first, so a compound
here (外部キー) is read before its parts.
"""

from __future__ import annotations

TRADE_ENGLISH: dict[str, tuple[str, ...]] = {
    # doing things to data
    "取り消す": ("undo", "revert"),
    "取り消し": ("undo", "revert"),
    "取り出す": ("extract",),
    "抽出": ("extract",),
    "結合": ("join", "concatenate", "merge"),
    "連結": ("concatenate", "join"),
    "分割": ("split",),
    "置換": ("replace", "substitute"),
    "置き換える": ("replace",),
    "書き換える": ("modify", "change"),
    "変換": ("convert",),
    "追加": ("add", "append"),
    "挿入": ("insert",),
    "削除": ("delete", "remove"),
    "除外": ("exclude", "ignore"),
    "取得": ("retrieve", "fetch"),
    "更新": ("update", "upgrade"),
    "上書き": ("overwrite",),
    "並べ替え": ("sort",),
    "並べ替える": ("sort",),
    "絞り込む": ("filter",),
    "比較": ("compare",),
    "検索": ("search", "find"),
    "一致": ("match",),
    "反復": ("iterate",),
    "集計": ("aggregate", "count"),
    # switching things
    "有効": ("enable", "valid"),
    "有効化": ("enable",),
    "無効": ("disable", "invalid"),
    "無効化": ("disable",),
    "切り替える": ("switch", "toggle"),
    "既定": ("default",),
    "初期値": ("default", "initial value"),
    "初期化": ("initialize",),
    # running things
    "実行": ("run", "execute"),
    "起動": ("start", "launch"),
    "停止": ("stop",),
    "終了": ("exit", "terminate"),
    "中断": ("abort", "interrupt"),
    "再起動": ("restart",),
    "呼び出す": ("call", "invoke"),
    "送出": ("raise", "throw"),
    "捕捉": ("catch",),
    "待機": ("wait",),
    "監視": ("watch", "monitor"),
    "送信": ("send",),
    "受信": ("receive",),
    # reading and writing
    "読み込む": ("read", "load"),
    "読み込み": ("read", "load"),
    "書き込む": ("write",),
    "書き込み": ("write",),
    "保存": ("save", "store"),
    "出力": ("output", "print"),
    "フォルダ": ("folder", "directory"),
    "フォルダー": ("folder", "directory"),
    "表示": ("show", "display", "print"),
    "一覧": ("list",),
    "公開": ("publish", "public"),
    "共有": ("share",),
    "非公開": ("private",),
    # things
    "文字列": ("string",),
    "整数": ("integer",),
    "浮動小数点数": ("float", "floating point"),
    "配列": ("array",),
    "引数": ("argument",),
    "戻り値": ("return value", "return"),
    "返り値": ("return value", "return"),
    "例外": ("exception",),
    "依存関係": ("dependency",),
    "履歴": ("history",),
    "コマンド履歴": ("history", "command history"),
    "環境変数": ("environment variable",),
    "一時ファイル": ("temporary file",),
    "外部キー": ("foreign key",),
    "主キー": ("primary key",),
    "一意": ("unique",),
    "上限": ("limit", "maximum"),
    "最大": ("maximum", "max"),
    "最小": ("minimum", "min"),
    "件数": ("count", "number"),
    "使用量": ("usage", "use"),
    "非同期": ("asynchronous", "async"),
    "同期": ("synchronous", "sync"),
    "並列": ("parallel",),
    "暗号化": ("encrypt",),
    "圧縮": ("compress",),
    "展開": ("extract", "unpack"),
}
