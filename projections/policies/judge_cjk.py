"""Single-valued relations stated in Chinese and Japanese, for the rule judge's text analysis.

No space marks a word in CJK text, so :mod:`.judge_text` splits it into characters; a character view alone
cannot tell "我住在里斯本" / "我现在住在波尔图" (one home, two values) from "我喜欢蓝色" / "我喜欢绿色" (two
things liked). :func:`cjk_relation` reads one run of CJK text (a clause: punctuation and digits end it) as
*subject*, *relation*, *value* when it states one of the relations the English rules know: residence (住在,
搬到 = moved to; に住んでいます, に引っ越しました), employer (在…工作, 就职于; で働いています), job (当, 做,
担任; として働いています), birthplace (出生于, 在…出生; で生まれました, 生まれです), spouse (和…结婚,
嫁给; と結婚しています), name (叫, 名叫; という名前です, と申します) and an attribute that holds one value
(最喜欢的颜色是…, 名字是…, 生日是…; 好きな色は…です, 名前は…です).

It says nothing (``None``) whenever unsure, since a wrong supersede costs the user a fact: a negation
anywhere in the clause, a past state (以前, 曾经, 去年, 住过, 工作了; いました, いた), a value that lists
several things (和, 与, 、; と, や), names a person (我, 他; 私, 彼), points somewhere (这里; ここ), numbers a
room, a building or a floor (3号楼, 501室, 三楼), asks (他叫什么), or, for an employer, is a place ("我在北京工作"
says where, not for whom), and a wish or a plan (我想住在…, 我打算…).
Present-tense adverbs (现在, 目前; 今は, 現在) are set apart so that they do not read as part of the subject.
"""

from __future__ import annotations

import re
from typing import NamedTuple


class CJKRelation(NamedTuple):
    subject: str  # what precedes the relation, present-tense adverbs taken out ("我", "我妹妹", "私は", "我最喜欢的颜色")
    relation: str  # "<residence>", "<moved>", "<employer>", "<job>", "<born>", "<spouse>", "<named>", "<attr>"
    value: str


_V = r"(?P<v>.+?)"
_VJ = r"(?P<v>[^はが]+?)"  # a Japanese value: after the topic (私は, 妹が)
_S = r"(?P<s>.*?)"
_JA_NOW = r"(?:います|いる|る)"  # the present of ～ている; the past (いました, いた) matches nothing
_CLASSIFIER = r"(?:一名|一个|一個|一位|名|个|個|位)?"
_ATTRIBUTES_ZH = ("最喜欢的.{0,4}?|最喜歡的.{0,4}?|最爱的.{0,4}?|最愛的.{0,4}?|名字|生日|职业|職業|家乡|家鄉|老家|故乡|"
                  "国籍|國籍|母语|母語|血型|星座|丈夫|妻子|老公|老婆|太太|爱人|愛人|老板|老闆|上司")
_ATTRIBUTES_JA = "(?:一番)?好きな.{1,4}?|名前|誕生日|職業|出身|夫|妻|上司|血液型|国籍"

# (relation, pattern) in the order tried; each pattern must match the whole clause
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple((rel, re.compile(p)) for rel, p in (
    ("<attr>", f"{_S}(?P<a>{_ATTRIBUTES_ZH})(?:是|叫|为|為){_V}"),
    ("<attr>", f"{_S}(?P<a>{_ATTRIBUTES_JA})(?:は|が){_V}(?:です|だ)?"),
    ("<moved>", f"{_S}(?:搬家到|搬到|搬去|搬回|移居到|移居|迁居到|迁居|迁到|遷居到|遷到)了?{_V}(?:去了|来了|了)?"),
    ("<residence>", f"{_S}(?:居住在|定居在|生活在|住在|居住于|定居于|住於|居住於){_V}"),
    ("<born>", f"{_S}(?:出生于|出生於|出生在|生于|生於){_V}"),
    ("<born>", f"{_S}在{_V}出生的?"),
    ("<employer>", f"{_S}(?:就职于|就職於|任职于|任職於|供职于|供職於|受雇于|受僱於){_V}"),
    ("<employer>", f"{_S}(?:在|为|為){_V}(?:工作|上班|任职|任職|就职|就職)"),
    ("<job>", f"{_S}(?P<j>担任|擔任|当|當|做)(?:上了|上|了)?{_CLASSIFIER}{_V}"),
    ("<spouse>", f"{_S}(?:和|跟|与|與){_V}结婚了?"),
    ("<spouse>", f"{_S}(?:嫁给|嫁給|娶了){_V}"),
    ("<named>", f"{_S}(?:名叫|叫做|叫){_V}"),
    ("<residence>", f"{_S}{_VJ}(?:に住んで|に暮らして){_JA_NOW}"),
    ("<residence>", f"{_S}{_VJ}在住(?:です)?"),
    ("<moved>", f"{_S}{_VJ}(?:に|へ)引っ越し(?:ました|た|てきました|てきた)"),
    ("<job>", f"{_S}{_VJ}として働いて{_JA_NOW}"),
    ("<employer>", f"{_S}{_VJ}(?:で働いて|に勤めて|に勤務して){_JA_NOW}"),
    ("<born>", f"{_S}{_VJ}(?:で生まれ(?:ました|た)|の?生まれ(?:です)?)"),
    ("<spouse>", f"{_S}{_VJ}と結婚(?:して{_JA_NOW}|しました|した)"),
    ("<named>", f"{_S}{_VJ}(?:という名前(?:です)?|と申します|といいます)"),
))

# a negation cue anywhere in the clause: the relation is not stated (the character view compares negations)
_NEGATION_RE = re.compile("不|没|沒|未|ません|ない|なかった|じゃ")
# a past state: 以前住在北京 (lived), 在谷歌工作过 (has worked), 当时, 小时候; Japanese past endings match no pattern
_PAST_RE = re.compile("以前|之前|曾经|曾經|曾|过去|過去|从前|從前|原来|原來|当时|當時|那时|那時|小时候|小時候|去年|前年|"
                      "年轻时|年輕時|上个月|上個月|昔|かつて|子供の頃|でした|だった")
# a wish, a plan or a duty is no state: 我想住在东京, 我打算在谷歌工作, 我应该当医生
_MODAL_RE = re.compile("(?:想|要|希望|打算|梦想|夢想|将|將|会|會|能|可以|应该|應該|准备|準備|计划|計劃|愿意|願意|得|该|該)$")
# present-tense adverbs, each with what may not follow it (还有 and also, 今日 today, 今年 this year)
_ADVERB_SPEC = ("现在 現在 目前 如今 最近 已经 已經 刚刚 剛剛 刚 剛 还/有 還/有 也 一直 仍然 依然 今では 今は "
                "今/日年度月週回後 もう")
_ADVERB_RE = re.compile("|".join(f"{w}(?![{not_after}])" if not_after else w
                                 for w, _, not_after in (item.partition("/") for item in _ADVERB_SPEC.split())))
_LIST_RE = re.compile("和|与|與|跟|及|或|、|还有|還有|と|や|も")
_PERSON_RE = re.compile("我|你|您|他|她|它|们|們|自己|私|僕|俺|彼|あなた")
_DEICTIC_RE = re.compile("这里|這裡|这儿|這兒|那里|那裡|那儿|那兒|附近|家里|家裡|ここ|そこ|あそこ|近く")
_NUMBERED_RE = re.compile("号|號|室|栋|棟|楼|樓|层|層|房间|房間|番地|丁目|階")
_QUESTION_RE = re.compile("什么|什麼|谁|誰|哪|几|幾|怎|吗|嗎|呢|何|どこ|どちら|か$")
# an employer's value that is where, not for whom: a place name, a generic place
_PLACE_SUFFIX = frozenset("市省县縣区區州镇鎮村国國都府県町")
_PLACES = frozenset((
    # generic places
    "家 家里 家裡 公司 办公室 辦公室 外地 国外 國外 海外 城里 城裡 市里 本地 当地 當地 网上 網上 线上 線上 远程 遠程 "
    "乡下 鄉下 农村 農村 郊区 郊區 市中心 总部 總部 自宅 会社 在宅 現地 地元 都内 "
    # countries and regions
    "中国 中國 日本 美国 美國 英国 英國 法国 法國 德国 德國 韩国 韓國 朝鲜 加拿大 澳洲 澳大利亚 新西兰 欧洲 歐洲 亚洲 "
    "亞洲 非洲 越南 泰国 泰國 印度 印尼 印度尼西亚 马来西亚 馬來西亞 菲律宾 新加坡 俄罗斯 俄羅斯 意大利 義大利 西班牙 "
    "葡萄牙 荷兰 荷蘭 瑞士 瑞典 挪威 丹麦 芬兰 波兰 比利时 奥地利 希腊 爱尔兰 土耳其 以色列 埃及 南非 巴西 墨西哥 "
    "阿根廷 智利 迪拜 台湾 臺灣 台灣 香港 澳门 澳門 内地 大陆 大陸 米国 英国 仏 独 韓国 豪州 "
    # cities
    "北京 上海 广州 廣州 深圳 杭州 南京 成都 武汉 武漢 西安 天津 重庆 重慶 苏州 蘇州 长沙 長沙 郑州 鄭州 青岛 青島 "
    "厦门 廈門 大连 大連 沈阳 瀋陽 哈尔滨 昆明 合肥 济南 福州 宁波 无锡 东莞 佛山 珠海 台北 臺北 台中 高雄 "
    "东京 東京 大阪 京都 横浜 横滨 名古屋 福冈 福岡 札幌 神戸 神户 仙台 広島 广岛 沖縄 冲绳 奈良 千葉 埼玉 "
    "首尔 首爾 釜山 纽约 紐約 洛杉矶 旧金山 舊金山 西雅图 芝加哥 波士顿 硅谷 矽谷 多伦多 温哥华 悉尼 墨尔本 "
    "伦敦 倫敦 巴黎 柏林 慕尼黑 法兰克福 阿姆斯特丹 罗马 羅馬 米兰 巴塞罗那 马德里 里斯本 波尔图 维也纳 苏黎世 "
    "莫斯科 曼谷 河内 吉隆坡 雅加达 马尼拉 孟买 "
    "ニューヨーク ロンドン パリ ベルリン シンガポール ソウル アメリカ イギリス フランス ドイツ カナダ "
    "オーストラリア シドニー シリコンバレー タイ ベトナム インド 台湾 上海 北京 香港"
).split())
# a job taken with 当 or 做 ends like one (老师, 医生, 护士, 会计, 司机, 经理, 警察, 演员, 记者, 工程师): 当时,
# 当地, 当然, 做饭, 做作业, 做生意 are no jobs
_JOB_ENDINGS = frozenset("师師员員生士者家工手官长長计計机機理察兵译譯匠授主管辑輯书書板导導")
_KIN_START = frozenset("弟妹哥姐爸妈媽儿兒女孩")


def cjk_relation(run: str) -> CJKRelation | None:
    """The single-valued relation one clause of CJK text states, or ``None`` (see the module docstring)."""
    if _NEGATION_RE.search(run) or _PAST_RE.search(run):
        return None
    if _ADVERB_RE.search(run) and (stated := _match(_ADVERB_RE.sub("", run))) is not None:
        tail = len(run) - run.rindex(stated.value) if stated.value in run else 0
        if _ADVERB_RE.sub("", run[-tail:]) == run[-tail:]:  # 我现在住在…, 私は今大阪に…: before the value
            return stated
    return _match(run)  # 我叫王刚: 刚 (just) is part of a name


def _match(clause: str) -> CJKRelation | None:
    for relation, pattern in _PATTERNS:
        m = pattern.fullmatch(clause)
        if m is None:
            continue
        subject, value = m.group("s") + (m.groupdict().get("a") or ""), m.group("v")
        return CJKRelation(subject, relation, value) if _plausible(relation, m, subject, value) else None
    return None


def _plausible(relation: str, m: re.Match[str], subject: str, value: str) -> bool:
    """The value is one value of the relation, not a list, a person, a pointer, a numbered room or floor, a
    question or a place where someone works; the relation is stated, not wished for."""
    if not 1 <= len(value) <= 10 or "的" in value or "之" in value:
        return False
    if any(r.search(value) for r in (_LIST_RE, _PERSON_RE, _DEICTIC_RE, _NUMBERED_RE, _QUESTION_RE)):
        return False
    if _MODAL_RE.search(m.group("s")) or "です" in value or "ます" in value:
        return False
    if relation == "<employer>":
        return value not in _PLACES and value[-1] not in _PLACE_SUFFIX
    if relation == "<job>" and m.groupdict().get("j") in ("当", "當", "做"):
        return len(value) >= 2 and value[-1] in _JOB_ENDINGS and bool(subject)
    if relation == "<named>":
        return bool(subject) and len(value) <= 4 and value[0] not in _KIN_START
    return True
